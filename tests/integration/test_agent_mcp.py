"""MCP tools through the agent: offered as `<server>_<tool>`, approved like code, results back to the model."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import psutil
import pytest
import pytest_asyncio
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolReturnPart, UserPromptPart

from freeact_sub import (
    Agent,
    ApprovalRequest,
    CodeExecutionOutput,
    ConfigError,
    KernelError,
    McpServerError,
    RunCancelled,
    ToolOutput,
)
from tests.processes import is_gone, kernel_processes
from tests.scripting import Call, Script, configs, drive, of
from tests.servers import calc_server

pytestmark = pytest.mark.asyncio(loop_scope="module")



config = configs(enable_subagents=False)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory):
    """An agent with the calc server, for tests that do not crash the server or restart the kernel."""
    script = Script()
    workdir = tmp_path_factory.mktemp("mcp-agent")
    async with Agent(config(script.model, workdir, mcp_servers={"calc": calc_server()})) as agent:
        yield agent, script


async def test_mcp_tools_are_offered_with_their_schemas(shared) -> None:
    agent, script = shared
    script.reset(["hi"])
    await drive(agent.stream("hello"))
    offered = {tool.name: tool for tool in script.infos[0].function_tools}
    assert {"calc_add", "calc_echo", "calc_server_pid", "execute_ipython_cell", "reset_kernel"} <= set(offered)
    add = offered["calc_add"]
    assert add.description == "Add two integers."
    assert add.parameters_json_schema["properties"]["b"]["type"] == "integer"
    assert "calc_add" in agent.tool_names


async def test_an_mcp_call_needs_approval_and_its_result_goes_back(shared) -> None:
    agent, script = shared
    script.reset([Call("calc_add", {"a": 2, "b": 40}, id="add")], ["42"])
    events = await drive(agent.stream("add"))
    request = of(ApprovalRequest, events)[0]
    assert (request.tool_name, request.tool_args, request.auto_approved) == ("calc_add", {"a": 2, "b": 40}, False)
    assert request.code is None
    output = of(ToolOutput, events)[0]
    assert (output.tool_name, output.tool_call_id, output.content, output.is_error) == ("calc_add", "add", "42", False)
    assert events.index(request) < events.index(output)
    assert script.tool_results(1) == {"add": "42"}


async def test_a_rejected_mcp_call_does_not_run(shared) -> None:
    agent, script = shared
    script.reset([Call("calc_echo", {"text": "no"}, id="echo")])
    events = await drive(agent.stream("echo"), decide=False)
    assert not of(ToolOutput, events)
    assert "rejected" in events[-1].content and "calc_echo" in events[-1].content


async def test_mcp_arguments_are_checked_against_the_servers_schema(shared) -> None:
    agent, script = shared
    script.reset([Call("calc_add", {"a": "two"}, id="bad")], ["oops"])
    events = await drive(agent.stream("add badly"), decide=lambda r: pytest.fail("a bad call was put up"))
    result = script.tool_results(1)["bad"]
    assert "'b' is a required property" in result
    assert "'two' is not of type 'integer'" in result
    assert of(ToolOutput, events)[0].is_error


async def test_an_error_inside_an_mcp_tool_is_an_error_result(shared) -> None:
    agent, script = shared
    script.reset([Call("calc_fail", {"message": "bad input"}, id="fail")], ["I see"])
    events = await drive(agent.stream("fail"))
    output = of(ToolOutput, events)[0]
    assert output.is_error
    assert script.tool_results(1)["fail"] == output.content
    assert events[-1].content == "I see"


async def test_a_cell_and_an_mcp_call_of_one_response_run_concurrently(shared, tmp_path: Path) -> None:
    # the cell waits for a file that the test writes only once the MCP call has finished:
    # run one after the other (cell first), the turn could never end
    agent, script = shared
    flag = tmp_path / "flag"
    code = f"import os, time\nwhile not os.path.exists({str(flag)!r}):\n    time.sleep(0.01)\nprint('cell done')"
    script.reset(
        [Call("execute_ipython_cell", {"code": code}, id="cell"), Call("calc_echo", {"text": "mcp done"}, id="mcp")],
        ["both"],
    )

    async def consume() -> list:
        events = []
        async for event in agent.stream("together"):
            events.append(event)
            if isinstance(event, ApprovalRequest):
                event.approve(True)
            if isinstance(event, ToolOutput) and event.tool_call_id == "mcp":
                flag.touch()
        return events

    events = await asyncio.wait_for(consume(), 60)
    assert script.tool_results(1) == {"cell": "cell done\n", "mcp": "mcp done"}
    order = [e.tool_call_id for e in events if isinstance(e, ToolOutput | CodeExecutionOutput)]
    assert order == ["mcp", "cell"]


async def test_cancel_during_an_mcp_call(shared) -> None:
    agent, script = shared
    before = agent.history
    script.reset([Call("calc_sleep", {"seconds": 600}, id="sleep")])
    events = []
    async for event in agent.stream("sleep"):
        events.append(event)
        if isinstance(event, ApprovalRequest):
            event.approve(True)
            agent.cancel()
    assert isinstance(events[-1], RunCancelled)
    # the history keeps the call and answers it as interrupted, then notes the interruption (issue 8)
    history = agent.history
    assert history[: len(before)] == before
    call, answer = history[-2], history[-1]
    assert isinstance(call, ModelResponse) and [p.tool_call_id for p in call.parts] == ["sleep"]
    assert isinstance(answer, ModelRequest)
    results = {p.tool_call_id: str(p.content) for p in answer.parts if isinstance(p, ToolReturnPart)}
    assert "interrupted" in results["sleep"]
    assert isinstance(answer.parts[-1], UserPromptPart) and "interrupted" in str(answer.parts[-1].content)
    script.reset([Call("calc_add", {"a": 1, "b": 1}, id="after")], ["ok"])
    await asyncio.wait_for(drive(agent.stream("again")), 60)
    assert script.tool_results(1) == {"after": "2"}


async def test_a_server_that_crashes_mid_session_becomes_an_error_result(tmp_path: Path) -> None:
    script = Script(
        [Call("calc_server_pid", {}, id="pid")],
        [Call("calc_crash", {}, id="crash")],
        [
            Call("calc_add", {"a": 1, "b": 2}, id="again"),
            Call("execute_ipython_cell", {"code": "print('ok')"}, id="cell"),
        ],
        ["The calc server is gone, but I can still run code."],
    )
    async with Agent(config(script.model, tmp_path, mcp_servers={"calc": calc_server()})) as agent:
        events = await drive(agent.stream("crash it"))
    pid = int(script.tool_results(1)["pid"])
    assert await is_gone(pid)
    crash = script.tool_results(2)["crash"]
    assert "'calc'" in crash
    assert [o.is_error for o in of(ToolOutput, events) if o.tool_call_id in ("crash", "again")] == [True, True]
    results = script.tool_results(3)
    assert "'calc'" in results["again"]
    assert results["cell"] == "ok\n"
    assert events[-1].content.startswith("The calc server is gone")


async def test_a_server_that_does_not_start_names_the_server_and_leaves_nothing_running(tmp_path: Path) -> None:
    script = Script()
    # its command exists (a missing one is a ConfigError before anything starts), but it is no MCP server
    ghost = {"command": sys.executable, "args": ["-c", "import sys; sys.exit('no-such-binary: cannot serve')"]}
    agent = Agent(config(script.model, tmp_path, mcp_servers={"calc": calc_server(), "ghost": ghost}))
    with pytest.raises(McpServerError) as info:
        await agent.start()
    assert info.value.server == "ghost"
    assert "no-such-binary" in str(info.value)
    assert not agent.started
    assert agent.kernel is None
    # the leak fixture checks that the kernel and the calc server were stopped


async def test_a_kernel_that_cannot_start_closes_the_mcp_sessions(tmp_path: Path) -> None:
    # a Python that cannot find its standard library: the kernel's interpreter dies at once
    broken = {"PYTHONHOME": str(tmp_path / "no-python-here")}
    agent = Agent(config(Script().model, tmp_path / "work", mcp_servers={"calc": calc_server()}, kernel_env=broken))
    with pytest.raises(KernelError, match="did not start"):
        await agent.start()
    assert not agent.started
    # the leak fixture checks that the calc server was stopped


async def test_a_working_dir_that_cannot_be_a_folder_names_the_field_before_anything_starts(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    agent = Agent(config(Script().model, blocker / "work", mcp_servers={"calc": calc_server()}))
    kernels = kernel_processes()
    with pytest.raises(ConfigError, match=r"^working_dir: .*a-file/work cannot be the working folder: Not a directory"):
        await agent.start()
    assert not agent.started and kernel_processes() == kernels  # no kernel (nor, says the leak fixture, a server)


async def test_each_agent_has_its_own_sessions_closed_on_stop(tmp_path: Path) -> None:
    scripts = [Script([Call("calc_server_pid", {}, id="pid")], ["ok"]) for _ in range(2)]
    agents = [Agent(config(s.model, tmp_path / str(i), mcp_servers={"calc": calc_server()}))
              for i, s in enumerate(scripts)]
    await asyncio.gather(*(agent.start() for agent in agents))
    try:
        for agent in agents:
            await drive(agent.stream("pid?"))
        pids = [int(script.tool_results(1)["pid"]) for script in scripts]
        assert pids[0] != pids[1]
        assert all(psutil.Process(pid).is_running() for pid in pids)
        await agents[0].stop()
        assert await is_gone(pids[0])
        assert not await is_gone(pids[1], wait=0)  # stopping one agent leaves the other's server alone
    finally:
        await asyncio.gather(*(agent.stop() for agent in agents))
    assert await is_gone(pids[1])


async def test_the_third_party_time_server(tmp_path: Path) -> None:
    servers = {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}}
    script = Script([Call("time_get_current_time", {"timezone": "Europe/Berlin"}, id="now")], ["It is late."])
    async with Agent(config(script.model, tmp_path, mcp_servers=servers)) as agent:
        assert "time_convert_time" in agent.tool_names
        events = await drive(agent.stream("What time is it in Berlin?"))
    answer = json.loads(script.tool_results(1)["now"])
    assert answer["timezone"] == "Europe/Berlin"
    assert of(ToolOutput, events)[0].tool_name == "time_get_current_time"
