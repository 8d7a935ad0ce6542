"""MCP tools called from a cell's code: generated modules, per-call approval per agent, faults, isolation.

Real kernels and real MCP servers (our calc server, `mcp-server-time` from PyPI and
`@modelcontextprotocol/server-filesystem` from npm); the model is scripted.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
import pytest_asyncio

from freeact_sub import (
    Agent,
    AgentConfig,
    ApprovalRequest,
    CodeExecutionOutput,
    RunCancelled,
    ToolOutput,
)
from tests.npm_servers import filesystem_server
from tests.scripting import Call, Router, Script, configs, drive, of
from tests.servers import calc_server

pytestmark = pytest.mark.asyncio(loop_scope="module")

TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


def cell(code: str, call_id: str = "cell") -> Call:
    return Call("execute_ipython_cell", {"code": code}, id=call_id)


def config(model: object, workdir: Path, **settings: object) -> AgentConfig:
    """The module's agent: no `task` tool, the calc server's tools (as code)."""
    return configs(enable_subagents=False, mcp_servers={"calc": calc_server()})(model, workdir, **settings)


def code_requests(events: list) -> list[ApprovalRequest]:
    return [e for e in of(ApprovalRequest, events) if e.source == "code"]


def cell_output(events: list, call_id: str = "cell") -> CodeExecutionOutput:
    return next(e for e in of(CodeExecutionOutput, events) if e.tool_call_id == call_id)


async def one_cell(shared: tuple[Agent, Script], code: str, prompt: str, **how: Any) -> list[Any]:
    """The shared agent's model runs `code` in one cell, then says "done"; the turn's events (`how`: `drive()`'s)."""
    agent, script = shared
    script.reset([cell(code)], ["done"])
    return await drive(agent.stream(prompt), **how)


def only_cells(request: ApprovalRequest) -> bool | None:
    """Approve cells; leave calls from code open (the test decides them)."""
    return True if request.source == "model" else None


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory):
    """An agent with the calc server and the time server, for tests that do not crash or restart anything."""
    script = Script()
    workdir = tmp_path_factory.mktemp("code-tools")
    async with Agent(config(script.model, workdir, mcp_servers={"calc": calc_server(), "time": TIME})) as agent:
        yield agent, script


async def test_tools_are_modules_the_model_can_read_and_the_prompt_says_so(shared) -> None:
    agent, script = shared
    (package,) = (agent.config.working_dir.resolve() / ".freeact-sub" / "mcptools" / agent.agent_id).glob("*/mcptools")
    source = (package / "calc.py").read_text()
    assert "def add(*, a: int, b: int) -> int:" in source
    assert "Add two integers." in source
    time_source = (package / "time.py").read_text()
    assert "def get_current_time(*, timezone: str) -> dict[str, Any]:" in time_source
    assert "IANA timezone name" in time_source  # the argument's description is in the docstring
    script.reset([cell(f"import os\nprint(sorted(os.listdir({str(package)!r})))")], ["ok"])
    events = await drive(agent.stream("list the tools"))
    assert "'calc.py'" in cell_output(events).content and "'time.py'" in cell_output(events).content
    prompt = agent.system_prompt
    assert "from mcptools.<module> import <tool>" in prompt and str(package) in prompt
    assert "`mcptools.calc` (server `calc`): add, echo" in prompt
    assert "named `<server>_<tool>`" in prompt  # "both": direct calls are offered as well
    offered = {tool.name for tool in script.infos[0].function_tools}
    assert "calc_add" in offered


async def test_a_loop_of_100_calls_with_a_standing_approval(shared) -> None:
    agent, script = shared
    code = "from mcptools.calc import add\ntotal = 0\nfor i in range(100):\n    total = add(a=total, b=i)\nprint(total)"
    script.reset([cell(code)], ["done"])
    agent.approvals.always(agent.agent_id)
    try:
        events = await drive(agent.stream("sum it"), decide=False)  # nothing may need asking
    finally:
        agent.approvals.clear(agent.agent_id)
    assert cell_output(events).content.strip() == "4950"
    requests = code_requests(events)
    assert len(requests) == 100
    assert all(r.auto_approved and r.agent_id == agent.agent_id and r.cell_call_id == "cell" for r in requests)
    assert requests[5].tool_name == "calc_add" and requests[5].tool_args == {"a": 10, "b": 5}
    outputs = [e for e in of(ToolOutput, events) if e.source == "code"]
    assert len(outputs) == 100 and outputs[-1].content == "4950"
    assert [o.tool_call_id for o in outputs] == [r.tool_call_id for r in requests]
    assert "4950" in script.tool_results(1)["cell"]  # the model sees the cell's output, not 100 results


async def test_calls_from_threads_of_one_cell_run_at_the_same_time(shared) -> None:
    agent, script = shared
    code = (
        "from concurrent.futures import ThreadPoolExecutor\nfrom mcptools.calc import sleep\n"
        "with ThreadPoolExecutor(3) as pool:\n    print(list(pool.map(lambda s: sleep(seconds=s), [0.5] * 3)))"
    )
    script.reset([cell(code)], ["done"])
    agent.approvals.always(agent.agent_id)
    try:
        events = await drive(agent.stream("sleep thrice"), decide=False)
    finally:
        agent.approvals.clear(agent.agent_id)
    assert cell_output(events).content.strip() == "['slept 0.5', 'slept 0.5', 'slept 0.5']"
    calls = [e for e in events if getattr(e, "source", "model") == "code"]
    kinds = [type(e).__name__ for e in calls]
    assert kinds[:3] == ["ApprovalRequest"] * 3  # all three were under way before the first result came back
    assert kinds.count("ToolOutput") == 3


async def test_structured_results_come_back_as_python_values(shared) -> None:
    code = (
        "from mcptools.time import get_current_time\nfrom mcptools.calc import echo\n"
        "now = get_current_time(timezone='UTC')\nprint(type(now).__name__, now['timezone'], repr(echo(text='hi')))"
    )
    events = await one_cell(shared, code, "time")
    assert cell_output(events).content.strip() == "dict UTC 'hi'"
    assert [r.tool_name for r in code_requests(events)] == ["time_get_current_time", "calc_echo"]


async def test_a_rejected_call_raises_in_the_cell_and_the_agent_goes_on(shared) -> None:
    agent, script = shared
    code = "from mcptools.calc import echo\necho(text='secret')"
    script.reset([cell(code), ], ["the call was rejected"])
    events = await drive(agent.stream("echo"), decide=lambda r: r.source == "model")
    output = cell_output(events)
    assert output.status == "error", output.content
    assert "ToolRejected" in output.content and "calc.echo was not approved" in output.content
    # the call site and the one error line, not 40 lines through the generated modules (issue 40, item 5)
    lines = output.content.strip().splitlines()
    assert "echo(text='secret')" in output.content and lines[-1].startswith("ToolRejected: ")
    assert "_runtime.py" not in output.content and len(lines) <= 6, output.content
    assert not [e for e in of(ToolOutput, events) if e.source == "code"]  # it never ran
    assert events[-1].content == "the call was rejected"  # the turn went on: the model got the traceback
    script.reset([cell("print(1 + 1)", "next")], ["2"])
    assert cell_output(await drive(agent.stream("go on")), "next").content.strip() == "2"


async def test_arguments_that_do_not_fit_the_schema_are_refused_before_approval(shared) -> None:
    code = (
        "import mcptools\nfrom mcptools.calc import add\n"
        "try:\n    add(a='two', b=2)\nexcept mcptools.ToolArgumentError as error:\n    print('refused:', error)\n"
        "try:\n    add(a=1)\nexcept TypeError as error:\n    print('python:', error)\n"
    )
    events = await one_cell(shared, code, "bad")
    text = cell_output(events).content
    assert "refused: Invalid arguments for calc.add:\n- a: 'two' is not of type 'integer'" in text
    assert "python: add() missing 1 required keyword-only argument: 'b'" in text
    assert code_requests(events) == []  # nobody was asked


async def test_an_error_of_the_tool_raises_tool_error_with_the_servers_message(shared) -> None:
    code = (
        "import mcptools\nfrom mcptools.calc import fail\n"
        "try:\n    fail(message='boom')\nexcept mcptools.ToolError as error:\n    print('ToolError:', error)\n"
    )
    events = await one_cell(shared, code, "fail")
    assert "ToolError: Error executing tool fail" in cell_output(events).content
    output = next(e for e in of(ToolOutput, events) if e.source == "code")
    assert output.is_error and output.tool_name == "calc_fail"


async def test_waiting_for_approval_does_not_count_against_the_cell_timeout(tmp_path: Path) -> None:
    script = Script([cell("from mcptools.calc import add\nprint(add(a=1, b=2))")], ["done"])
    async with Agent(config(script.model, tmp_path, execution_timeout=1.0)) as agent:

        async def slow(request: ApprovalRequest) -> None:
            await asyncio.sleep(2.5)  # the person takes longer than the cell may run
            request.approve(True)

        pending: list[asyncio.Task[None]] = []
        async for event in agent.stream("add"):
            if isinstance(event, ApprovalRequest) and not event.decided:
                if event.source == "code":
                    pending.append(asyncio.create_task(slow(event)))
                else:
                    event.approve(True)
            if isinstance(event, CodeExecutionOutput):
                output = event
        await asyncio.gather(*pending)
    assert (output.status, output.content.strip()) == ("ok", "3")


async def test_a_server_that_crashes_mid_call_raises_tool_error(tmp_path: Path) -> None:
    code = (
        "import mcptools\nfrom mcptools.calc import crash, add\n"
        "for call in (lambda: crash(), lambda: add(a=1, b=1)):\n"
        "    try:\n        call()\n    except mcptools.ToolError as error:\n        print('ToolError:', error)\n"
    )
    script = Script([cell(code)], ["done"], [cell("print('alive')", "after")], ["ok"])
    async with Agent(config(script.model, tmp_path, auto_approve=True)) as agent:
        text = cell_output(await drive(agent.stream("crash"))).content
        assert "ToolError: MCP server 'calc' failed while running 'crash'" in text
        second = text.splitlines()[1]  # the server is gone: the next call fails too, and says why
        assert second.startswith("ToolError: MCP server 'calc'") and ("'add'" in second or "not running" in second)
        assert cell_output(await drive(agent.stream("still there?")), "after").content.strip() == "alive"


async def test_a_cell_cancelled_while_its_call_waits_for_approval(tmp_path: Path) -> None:
    code = "from mcptools.calc import echo\necho(text='never')"
    check = "import sys\nprint(type(sys.last_value).__name__, sys.last_value)"
    script = Script([cell(code)], [cell(check, "check")], ["ok"])
    async with Agent(config(script.model, tmp_path)) as agent:
        events = []
        async for event in agent.stream("echo"):
            events.append(event)
            if isinstance(event, ApprovalRequest) and event.source == "model":
                event.approve(True)
            elif isinstance(event, ApprovalRequest):
                agent.cancel()  # the call waits for a decision that never comes
        assert isinstance(events[-1], RunCancelled)
        assert not of(ToolOutput, events)
        after = await drive(agent.stream("what happened?"))
    text = cell_output(after, "check").content
    assert "ToolCancelled the turn was cancelled" in text


async def test_a_connection_without_the_secret_is_refused_by_the_kernel(tmp_path: Path) -> None:
    script = Script()
    async with Agent(config(script.model, tmp_path, approvals={"*": "allow"})) as agent:
        assert agent.parts.code_tools is not None
        script.reset([cell("from mcptools.calc import add\nprint('first', add(a=1, b=2))", "c1")], ["ok"])
        await drive(agent.stream("connect"))
        path = agent.parts.kernel.tools_socket
        assert path is not None
        # Something else on this machine reaches the kernel's listener first, with a wrong secret and with none:
        # the kernel refuses both and takes its agent's next connection.
        intruders = []
        for greeting in (b'{"secret": "guess"}', b'{}'):
            _, writer = await asyncio.open_unix_connection(path)
            writer.write(len(greeting).to_bytes(4, "big") + greeting)
            await writer.drain()
            intruders.append(writer)
        # Held connections: the idle one, the agent's queued one, then the intruders' (refused), then the agent's next.
        code = (
            "from mcptools import _runtime\nfrom mcptools.calc import add\n"
            "held = [_runtime._connection() for _ in range(3)]\n_runtime._idle.extend(held)\n"
            "print('sums', [add(a=2, b=3) for _ in range(3)], 'refused', _runtime.refused)"
        )
        script.reset([cell(code, "c2")], ["done"])
        events = await drive(agent.stream("intruders"))
        text = cell_output(events, "c2").content
        assert "sums [5, 5, 5] refused 2" in text
        for writer in intruders:
            writer.close()
        # the listener's folder is private to this user
        assert (os.stat(os.path.dirname(path)).st_mode & 0o777) == 0o700


async def test_calls_mode_offers_no_modules_and_code_mode_no_direct_calls(tmp_path: Path) -> None:
    script = Script(["hi"])
    async with Agent(config(script.model, tmp_path / "calls", mcp_tools="calls")) as agent:
        await drive(agent.stream("hello"))
        assert "calc_add" in agent.tool_names
        assert "mcptools" not in agent.system_prompt and "named `<server>_<tool>`" in agent.system_prompt
        assert not (tmp_path / "calls" / ".freeact-sub" / "mcptools").exists()
    script = Script([cell("from mcptools.calc import add\nprint(add(a=20, b=22))")], ["42"])
    async with Agent(config(script.model, tmp_path / "code", mcp_tools="code", auto_approve=True)) as agent:
        events = await drive(agent.stream("add"))
        assert cell_output(events).content.strip() == "42"
        assert not any(name.startswith("calc_") for name in agent.tool_names)
        assert "named `<server>_<tool>`" not in agent.system_prompt
        package = agent.parts.code_tools.package if agent.parts.code_tools else None
    assert package is not None and not package.exists()  # removed with the agent


async def test_an_npm_server_from_code(tmp_path: Path) -> None:
    shared_dir = tmp_path / "files"
    shared_dir.mkdir()
    for name in ("a.txt", "b.txt", "c.md"):
        (shared_dir / name).write_text(f"contents of {name}\n")
    code = (
        "from mcptools.files import list_directory, read_text_file\n"
        f"listing = list_directory(path={str(shared_dir)!r})['content']\n"
        "names = [line.split()[-1] for line in listing.splitlines() if line.endswith('.txt')]\n"
        f"print([read_text_file(path={str(shared_dir)!r} + '/' + n)['content'].strip() for n in sorted(names)])"
    )
    script = Script([cell(code)], ["done"])
    servers = {"files": filesystem_server(shared_dir)}
    async with Agent(config(script.model, tmp_path, mcp_servers=servers, auto_approve=True)) as agent:
        events = await drive(agent.stream("read the text files"))
    assert cell_output(events).content.strip() == "['contents of a.txt', 'contents of b.txt']"
    assert [r.tool_name for r in code_requests(events)] == [
        "files_list_directory", "files_read_text_file", "files_read_text_file",
    ]


async def test_three_children_call_the_same_server_from_code_each_through_its_own_session(tmp_path: Path) -> None:
    code = "from mcptools.calc import server_pid, sleep\nsleep(seconds=0.5)\nprint('PID', server_pid())"
    parent = Script(
        [Call("task", {"prompt": f"CHILD-{n}: go"}, id=f"task-{n}") for n in range(3)],
        ["all done"],
    )
    children = {f"CHILD-{n}:": Script([cell(code)], [f"child {n} done"]) for n in range(3)}
    router = Router({"PARENT": parent, **children})
    settings = AgentConfig(
        model=router.model, working_dir=tmp_path, mcp_servers={"calc": calc_server()}, kernel_pool_size=0
    )
    servers_seen: set[int] = set()

    def count_servers() -> None:
        for process in psutil.Process().children(recursive=True):
            try:
                if "calc_server." in " ".join(process.cmdline()):
                    servers_seen.add(process.pid)
            except psutil.Error:
                continue

    async with Agent(settings) as agent:
        events = []
        async for event in agent.stream("PARENT: three jobs"):
            events.append(event)
            if isinstance(event, ApprovalRequest) and not event.decided:
                if event.source == "code":
                    count_servers()  # all three children are up by now, each with its own server
                event.approve(True)
    children_ids = {e.agent_id for e in events if e.agent_id != agent.agent_id}
    assert len(children_ids) == 3
    requests = code_requests(events)
    assert sorted(r.agent_id for r in requests if r.tool_name == "calc_server_pid") == sorted(children_ids)
    pids = {}
    for output in of(CodeExecutionOutput, events):
        pids[output.agent_id] = int(output.content.split()[-1])
    assert set(pids) == children_ids and len(set(pids.values())) == 3  # three sessions, three servers
    assert set(pids.values()) <= servers_seen
    # each child's code reached its own session: the ToolOutput under each child carries that child's server
    for output in of(ToolOutput, events):
        if output.tool_name == "calc_server_pid":
            assert json.loads(output.content) == pids[output.agent_id]


async def test_the_demo_runs_a_cell_that_calls_mcp_tools_from_code(tmp_path: Path) -> None:
    from freeact_sub.demo import demo_config, start_demo_server

    events = []
    with start_demo_server(chunk_delay=0) as server:
        async with Agent(demo_config(server, working_dir=tmp_path, kernel_pool_size=0)) as agent:
            events = await drive(agent.stream("Call the MCP tools from code"))
    assert [(r.tool_name, r.tool_args) for r in code_requests(events)] == [
        ("demo_constant", {"name": "pi"}), ("demo_constant", {"name": "e"}), ("demo_constant", {"name": "phi"}),
        ("demo_word_count", {"text": "code that calls tools keeps their raw results out of the context window"}),
    ]
    assert "pi = 3.141593" in of(CodeExecutionOutput, events)[0].content
    assert "the sentence has **13** words" in events[-1].content


async def test_a_cell_that_times_out_during_a_call_drops_the_call_and_the_session_goes_on(tmp_path: Path) -> None:
    slow = "from mcptools.calc import sleep\nsleep(seconds=30)"
    script = Script([cell(slow)], ["timed out"], [cell("from mcptools.calc import add\nprint(add(a=2, b=2))", "next")],
                    ["4"])
    async with Agent(config(script.model, tmp_path, auto_approve=True, execution_timeout=1.5)) as agent:
        started = asyncio.get_running_loop().time()
        output = cell_output(await drive(agent.stream("sleep")))
        assert output.status == "timeout" and "KeyboardInterrupt" in output.content
        assert asyncio.get_running_loop().time() - started < 20  # the 30 s call did not hold the cell
        assert cell_output(await drive(agent.stream("add")), "next").content.strip() == "4"


async def test_a_restarted_kernel_is_connected_again(tmp_path: Path) -> None:
    add = "from mcptools.calc import add\nprint(add(a=1, b=1))"
    script = Script([cell(add, "first"), Call("reset_kernel", {}, id="reset")], [cell(add, "second")], ["2"])
    async with Agent(config(script.model, tmp_path, auto_approve=True)) as agent:
        events = await drive(agent.stream("add, reset, add"))
    assert [cell_output(events, i).content.strip() for i in ("first", "second")] == ["2", "2"]
    assert agent.kernel is None  # stopped


async def test_approval_rules_decide_calls_from_code_without_asking(tmp_path: Path) -> None:
    code = (
        "import mcptools\nfrom mcptools.calc import echo, add\n"
        "try:\n    echo(text='no')\nexcept mcptools.ToolRejected as error:\n    print('rejected:', error)\n"
        "print(add(a=1, b=2))"
    )
    script = Script([cell(code)], ["done"])
    rules = {"calc_*": "allow", "calc_echo": "deny"}
    async with Agent(config(script.model, tmp_path, approvals=rules)) as agent:
        async with asyncio.timeout(120):  # a code call left to a person would hang here: only the cell is answered
            events = await drive(agent.stream("echo"), decide=only_cells)
    echo, add = code_requests(events)
    assert (echo.tool_name, echo.decided, echo.rule) == ("calc_echo", True, "'calc_echo': deny (approvals)")
    assert add.tool_name == "calc_add" and add.auto_approved
    text = cell_output(events).content
    assert "rejected: the call to calc.echo was not approved: an approval rule refuses it" in text
    assert text.strip().endswith("3")
    assert [e.tool_name for e in of(ToolOutput, events) if e.source == "code"] == ["calc_add"]  # echo never ran


async def test_an_agent_type_picks_which_tools_its_code_gets_and_how(tmp_path: Path) -> None:
    probe = (
        "import importlib.util\nfound = importlib.util.find_spec('mcptools') is not None\n"
        "if found:\n    import mcptools.calc as calc\n    print('functions:', calc.__all__, calc.add(a=1, b=1))\n"
        "else:\n    print('no mcptools')\n"
    )
    parent = Script(
        [
            Call("task", {"prompt": "CHILD-adder: go", "description": "add", "subagent_type": "adder"}, id="t1"),
            Call("task", {"prompt": "CHILD-caller: go", "description": "call", "subagent_type": "caller"}, id="t2"),
        ],
        ["done"],
    )
    children = {key: Script([cell(probe)], ["ok"]) for key in ("CHILD-adder:", "CHILD-caller:")}
    router = Router({"PARENT": parent, **children})
    agents = {
        "adder": {"description": "adds", "tools": ["execute_ipython_cell", "calc_add"]},
        "caller": {"description": "calls", "mcp_tools": "calls"},
    }
    settings = AgentConfig(model=router.model, working_dir=tmp_path, mcp_servers={"calc": calc_server()}, agents=agents,
                           kernel_pool_size=0, auto_approve=True)
    async with Agent(settings) as agent:
        events = await drive(agent.stream("PARENT: two typed children"))
    outputs = {e.agent_id: e.content for e in of(CodeExecutionOutput, events)}
    texts = sorted(outputs.values())
    assert texts == ["functions: ['add'] 2\n", "no mcptools\n"]  # the adder's code sees only `add`; the caller none
    caller = next(a for a, t in outputs.items() if "no mcptools" in t)
    offered = {t.name for t in children["CHILD-caller:"].infos[0].function_tools}
    assert "calc_echo" in offered  # its MCP tools are offered as calls instead
    assert caller != agent.agent_id


async def test_the_generated_package_of_an_agent_whose_host_died_is_removed_by_the_next_host(
    tmp_path: Path, calc_server_config: dict
) -> None:
    dead = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await dead.wait()
    packages = tmp_path / ".freeact-sub" / "mcptools"
    orphan, foreign = packages / "agent-dead", packages / "agent-unclaimed"
    for folder in (orphan, foreign):
        (folder / "mcptools").mkdir(parents=True)
    (orphan / "owner").write_text(str(dead.pid))  # its host was killed before it could clean up
    config = AgentConfig(model=Script(["hi"]).model, working_dir=tmp_path, mcp_servers={"calc": calc_server_config},
                         mcp_tools="code", save_sessions=False, enable_subagents=False)
    async with Agent(config) as agent:
        own = packages / agent.agent_id
        assert (own / "owner").read_text() == str(os.getpid())
        assert not orphan.exists() and foreign.exists()  # an unclaimed folder is not ours to judge
    assert not own.exists()


async def test_agents_with_the_same_tools_share_one_read_only_package_until_the_main_agent_stops(
    tmp_path: Path,
) -> None:
    probe = (
        "import json, os, mcptools, mcptools.calc as calc\n"
        "package = os.path.dirname(mcptools.__file__)\n"
        "modes = [os.stat(os.path.join(package, n)).st_mode for n in os.listdir(package) if n.endswith('.py')]\n"
        "tree = os.path.dirname(os.path.dirname(package))\n"
        "print(json.dumps({'package': package, 'tree': sorted(os.listdir(tree)), 'modes': modes, "
        "'sum': calc.add(a=2, b=3)}))\n"
    )
    calls = [
        Call("task", {"prompt": f"CHILD-{kind}: go", "description": kind, **extra}, id=kind)
        for kind, extra in (("one", {}), ("two", {}), ("adder", {"subagent_type": "adder"}))
    ]
    parent = Script(calls, ["done"])
    children = {f"CHILD-{kind}:": Script([cell(probe)], ["ok"]) for kind in ("one", "two", "adder")}
    router = Router({"PARENT": parent, **children})
    agents = {"adder": {"description": "adds", "tools": ["execute_ipython_cell", "calc_add"]}}
    settings = AgentConfig(model=router.model, working_dir=tmp_path, mcp_servers={"calc": calc_server()}, agents=agents,
                           auto_approve=True)
    async with Agent(settings) as agent:
        events = await drive(agent.stream("PARENT: three children"))
        own_package = re.search(r"real\s+files\s+in\s+`([^`]+)`", agent.system_prompt).group(1)  # type: ignore[union-attr]
        tree_folder = Path(own_package).parent.parent
        assert tree_folder.exists() and tree_folder.name == agent.agent_id
        assert tree_folder.parent.parts[-2:] == (".freeact-sub", "mcptools")
    outputs = [json.loads(e.content) for e in of(CodeExecutionOutput, events)]
    assert len(outputs) == 3 and all(out["sum"] == 5 for out in outputs)  # every child's call ran
    packages = sorted({out["package"] for out in outputs})
    assert len(packages) == 2  # the two general children share one package; the adder (fewer tools) has its own
    assert own_package in packages  # ... and the general children's is the main agent's own
    assert all(Path(p).parent.parent == tree_folder for p in packages)
    # One folder per tool set in the tree's folder (beside its owner file), not one per agent.
    seen = set().union(*(out["tree"] for out in outputs))
    assert seen == {Path(p).parent.name for p in packages} | {"owner"}
    assert all(mode & 0o222 == 0 for out in outputs for mode in out["modes"])  # no module is writable
    assert not tree_folder.exists()  # removed when the main agent stopped
