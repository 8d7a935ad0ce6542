"""A subagent opens its MCP connection when it first calls a tool, not when it starts.

Real calc servers throughout; each connection is told apart by its server's process id
(`calc_server_pid`), and the calc server processes under this test are counted with psutil.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from freeact_sub import Agent, SubagentFinished, SubagentStarted, ToolOutput
from tests.processes import calc_servers, is_gone
from tests.scripting import Block, Call, Router, Script, configs, drive, of, until

config = configs(auto_approve=True, kernel_pool_size=0, mcp_pool_size=0)


async def test_children_that_call_no_mcp_tool_start_no_server_yet_are_offered_its_tools(
    calc_server_config: dict, workdir: Path
) -> None:
    seen: set[int] = set()

    def count() -> None:
        seen.update(calc_servers())

    children = {f"CHILD-{n}:": Script(["nothing to call"]) for n in range(4)}
    parent = Script([Call("task", {"prompt": f"CHILD-{n}: job"}, id=f"t{n}") for n in range(4)], ["done"])
    model = Router({"PARENT": parent, **children}).model
    settings = config(model, workdir, mcp_servers={"calc": calc_server_config}, max_subagents=4,
                      disallowed_tools=["execute_ipython_cell"])
    async with Agent(settings) as agent:
        count()
        events = []
        async for event in agent.stream("PARENT go"):
            events.append(event)
            count()
        assert [e.status for e in of(SubagentFinished, events)] == ["done"] * 4
    assert len(seen) == 1, "only the main agent's server ran: no child opened one"
    for script in children.values():
        (info,) = script.infos
        assert {"calc_add", "calc_server_pid"} <= {tool.name for tool in info.function_tools}


async def test_a_child_opens_its_own_connection_at_its_first_call_and_closes_it_when_it_ends(
    calc_server_config: dict, workdir: Path
) -> None:
    """Two children call the server at the same time: each gets a server process of its own, not the main's."""
    release = asyncio.Event()
    children = {
        f"CHILD-{n}:": Script([Call("calc_server_pid", {}, id=f"pid-{n}")], [Block(release), f"child {n} done"])
        for n in range(2)
    }
    parent = Script([Call("calc_server_pid", {}, id="main-pid")],
                    [Call("task", {"prompt": f"CHILD-{n}: job"}, id=f"t{n}") for n in range(2)], ["done"])
    model = Router({"PARENT": parent, **children}).model
    async with Agent(config(model, workdir, mcp_servers={"calc": calc_server_config})) as agent:
        pids: dict[str, int] = {}
        events = []
        async for event in agent.stream("PARENT go"):
            events.append(event)
            if isinstance(event, ToolOutput) and event.tool_call_id.startswith(("pid-", "main-pid")):
                pids[event.tool_call_id] = int(event.content)
                if len(pids) == 3:
                    assert len(calc_servers()) == 3, "the main agent's and one per child, while both run"
                    release.set()
        assert len(set(pids.values())) == 3, "no two agents share a connection"
        for child in ("pid-0", "pid-1"):
            assert await is_gone(pids[child]), "a child's connection is closed when it ends"
        assert calc_servers() == {pids["main-pid"]}
    assert calc_servers() == set()


async def test_a_child_cancelled_while_its_connection_opens_leaves_no_server(
    calc_server_config: dict, workdir: Path
) -> None:
    slow = {"command": "/bin/sh", "args": ["-c", 'sleep 1.5; exec "$@"', "sh", calc_server_config["command"],
                                          *calc_server_config["args"]]}
    parent = Script([Call("calc_add", {"a": 1, "b": 1})],
                    [Call("task", {"prompt": "CHILD: job", "run_in_background": True}, id="t")], ["started"])
    child = Script([Call("calc_add", {"a": 2, "b": 3})], ["never"])
    model = Router({"PARENT": parent, "CHILD:": child}).model
    async with Agent(config(model, workdir, mcp_servers={"calc": slow})) as agent:
        events = await drive(agent.stream("PARENT go"))
        (started,) = of(SubagentStarted, events)
        main_servers = calc_servers()
        async with asyncio.timeout(30):
            while len(calc_servers()) == len(main_servers):  # noqa: ASYNC110 - the child's server is starting
                await asyncio.sleep(0.05)
        assert agent.cancel_subagent(started.subagent_id)
        # the connection finishes opening for nobody, and is closed: its server is stopped
        await until(lambda: calc_servers() == main_servers, "the cancelled child's server should stop", 20)
    assert calc_servers() == set()


async def test_a_server_that_cannot_start_at_first_use_is_a_readable_tool_result(
    calc_server_config: dict, workdir: Path, tmp_path: Path
) -> None:
    """The tools were listed by the main agent's connection; the child's own start then fails."""
    flag = tmp_path / "refuse"
    refuse = f'if [ -e "{flag}" ]; then echo refusing to start >&2; exit 1; fi; exec "$@"'
    server = [calc_server_config["command"], *calc_server_config["args"]]
    gate = {"command": "/bin/sh", "args": ["-c", refuse, "sh", *server]}
    parent = Script([Call("task", {"prompt": "CHILD: job"}, id="t")], ["done"])
    child = Script([Call("calc_add", {"a": 2, "b": 3}, id="add")], ["noted"])
    model = Router({"PARENT": parent, "CHILD:": child}).model
    async with Agent(config(model, workdir, mcp_servers={"calc": gate})) as agent:
        flag.touch()
        events = await drive(agent.stream("PARENT go"))
    (finished,) = of(SubagentFinished, events)
    assert finished.status == "done"
    result = child.tool_results(1)["add"]
    assert "MCP server 'calc' could not start" in result and "refusing to start" in result
