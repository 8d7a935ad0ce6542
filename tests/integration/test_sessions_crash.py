"""A host killed (SIGKILL) while some calls of one response have finished and others still run.

The host is a real process running a real `Agent` (kernel, our calc MCP server) with a scripted
model; the test kills it once the quick call's result is out and reads the saved session.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from freeact_sub.sessions import INTERRUPTED_RESULT, list_sessions, open_session
from tests.conftest import ROOT
from tests.servers import calc_server

_HOST = """
import asyncio, sys
from freeact_sub import Agent, AgentConfig, ToolOutput
from tests.scripting import Call, Script

async def main():
    script = Script([
        Call("calc_add", {"a": 2, "b": 3}, id="quick"),
        Call("execute_ipython_cell", {"code": "import time\\nprint('long', flush=True)\\ntime.sleep(600)"}, id="long"),
    ], ["never"])
    config = AgentConfig(model=script.model, working_dir=sys.argv[1], auto_approve=True, enable_subagents=False,
                         mcp_servers={"calc": {"command": sys.argv[2], "args": sys.argv[3:]}}, mcp_pool_size=0)
    async with Agent(config) as agent:
        async for event in agent.stream("add and wait"):
            if isinstance(event, ToolOutput) and event.tool_call_id == "quick":
                print("QUICK-DONE", flush=True)

asyncio.run(main())
"""


def test_a_call_that_finished_before_the_crash_keeps_its_result(workdir: Path) -> None:
    calc = calc_server()
    host = subprocess.Popen(
        [sys.executable, "-c", _HOST, str(workdir), calc["command"], *calc["args"]],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        assert host.stdout is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and host.stdout.readline().strip() != "QUICK-DONE":
            pass
        assert host.poll() is None, "the host ended before the quick call was done"
        descendants = psutil.Process(host.pid).children(recursive=True)
        os.kill(host.pid, signal.SIGKILL)  # mid-batch: the cell still runs
        host.wait(30)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(30)
    for process in descendants:  # the kernel and the MCP server of a killed host: ours to end here
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(descendants, timeout=10)

    (summary,) = list_sessions(workdir)
    saved = open_session(summary.session_id, workdir)
    repaired = saved.messages(repaired=True)
    results = {p.tool_call_id: p.content for m in repaired for p in m.parts if p.part_kind == "tool-return"}
    assert results["long"] == INTERRUPTED_RESULT  # the cell was running: its result is unknown
    assert "5" in str(results["quick"]) and results["quick"] != INTERRUPTED_RESULT  # it finished: its real result
    assert [m.kind for m in repaired] == ["request", "response", "request"]


async def test_a_child_cut_short_by_a_crash_is_resumed_as_interrupted_and_listed(workdir: Path) -> None:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

    from freeact_sub import Agent, AgentConfig, ToolOutput
    from freeact_sub.sessions import SessionStore
    from tests.scripting import Call, Router, Script, drive, of

    # an earlier process: the main agent started agent-0kid, which was killed in the middle of a cell
    store = SessionStore.create(workdir)
    main = store.agent("agent-0main")
    main.prompt("PARENT go")
    task_call = ToolCallPart("task", {"prompt": "CHILD-kid: job"}, "task-1")
    main_history = [ModelRequest(parts=[UserPromptPart("PARENT go")]), ModelResponse(parts=[task_call])]
    main.sync(main_history)
    kid = main.child("agent-0kid", tool_call_id="task-1", prompt="CHILD-kid: job")
    kid.sync([ModelRequest(parts=[UserPromptPart("CHILD-kid: job")]),
              ModelResponse(parts=[ToolCallPart("execute_ipython_cell", {"code": "work()"}, "cell-1")])])
    main.sync([*main_history, ModelRequest(parts=[ToolReturnPart("task", "[Interrupted]", "task-1")]),
               ModelResponse(parts=[TextPart("the kid was cut short")])])
    session_id = store.session_id
    store.close()

    parent = Script([Call("task_list", {}, id="list")],
                    [Call("task", {"prompt": "go on", "resume": "agent-0kid"}, id="again")], ["done"])
    kid_script = Script(["finished now"])
    model = Router({"PARENT": parent, "CHILD-kid:": kid_script}).model
    config = AgentConfig(model=model, working_dir=workdir, auto_approve=True, kernel_pool_size=0, mcp_pool_size=0)
    agent = Agent(config, session=session_id)
    assert [m.kind for m in agent.history] == ["request", "response", "request", "response"]  # before start()
    async with agent:
        events = await drive(agent.stream("PARENT more"))
    listing = parent.tool_results(1)["list"]
    assert "agent-0kid" in listing and "earlier-session" in listing
    first_note = [p.content for p in kid_script.requests[0][-1].parts if isinstance(p, UserPromptPart)]
    assert any("cut short before you finished" in str(note) for note in first_note), first_note
    assert not any("after you had finished" in str(note) for note in first_note)
    assert [e.content for e in of(ToolOutput, events) if e.tool_call_id == "again"] == ["finished now"]


async def test_a_finished_calls_result_is_saved_before_its_event_is_out(workdir: Path) -> None:
    """Whoever sees a call's result event may end the process at once: the result must be on disk by then."""
    from freeact_sub import Agent, AgentConfig, ToolOutput
    from tests.scripting import Call, Script

    script = Script([
        Call("calc_add", {"a": 2, "b": 3}, id="quick"),
        Call("execute_ipython_cell", {"code": "import time\ntime.sleep(60)"}, id="long"),
    ], ["never"])
    config = AgentConfig(model=script.model, working_dir=workdir, auto_approve=True, enable_subagents=False,
                         mcp_servers={"calc": calc_server()},
                         mcp_pool_size=0)
    seen_on_disk: object = None
    async with Agent(config) as agent:
        async for event in agent.stream("add and wait"):
            if isinstance(event, ToolOutput) and event.tool_call_id == "quick":
                assert agent.session_id is not None
                # read right away, without giving the event loop a turn
                repaired = open_session(agent.session_id, workdir).messages(repaired=True)
                seen_on_disk = {p.tool_call_id: p.content for m in repaired for p in m.parts
                                if p.part_kind == "tool-return"}.get("quick")
                break
    assert seen_on_disk is not None and "5" in str(seen_on_disk) and seen_on_disk != INTERRUPTED_RESULT
