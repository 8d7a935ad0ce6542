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
from tests.conftest import CALC_SERVER, ROOT

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
                         mcp_servers={"calc": {"command": sys.executable, "args": [sys.argv[2]]}}, mcp_pool_size=0)
    async with Agent(config) as agent:
        async for event in agent.stream("add and wait"):
            if isinstance(event, ToolOutput) and event.tool_call_id == "quick":
                print("QUICK-DONE", flush=True)

asyncio.run(main())
"""


def test_a_call_that_finished_before_the_crash_keeps_its_result(workdir: Path) -> None:
    host = subprocess.Popen(
        [sys.executable, "-c", _HOST, str(workdir), str(CALC_SERVER)],
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
