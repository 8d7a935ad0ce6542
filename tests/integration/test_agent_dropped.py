"""An agent dropped while started (never stopped) does not leak its processes, and a warning says so."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
from pathlib import Path

import psutil
import pytest

from freeact_sub import Agent, AgentConfig
from tests.processes import is_gone
from tests.scripting import Script

pytestmark = pytest.mark.timeout(120)


async def test_a_dropped_agent_is_stopped_on_its_loop(workdir: Path) -> None:
    agent = Agent(AgentConfig(model=Script().model, working_dir=workdir, kernel_pool_size=0, prestart_pools=True))
    await agent.start()
    zygote = agent.tree.supplies.zygote
    # The kernel zygote starts in the background; until that task ends it refers to the tree and
    # so to the agent, which could not be collected below (seen in a loaded run: DID NOT WARN).
    warming = agent.tree.supplies._warming
    assert warming is not None
    await warming
    del warming
    assert zygote.running
    pids = [agent.kernel.pid]
    assert agent.own_processes() == pids  # the process's zygote is every agent's, not this one's
    agent_id = agent.agent_id
    with pytest.warns(RuntimeWarning, match=f"{agent_id} was dropped while started"):
        del agent
        gc.collect()
    for _ in range(200):  # the agent is stopped by a task on this loop
        await asyncio.sleep(0.05)
        if all([await is_gone(pid, wait=0) for pid in pids]):
            break
    assert all([await is_gone(pid) for pid in pids])
    assert zygote.running  # it serves the next agent of this process
    del zygote


PROGRAM_THAT_RAISES = """
import asyncio, os, sys
from freeact_sub import Agent, AgentConfig
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

async def main():
    agent = Agent(AgentConfig(model=FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("hi")])),
                              working_dir=sys.argv[1], save_sessions=False, prestart_pools=True))
    await agent.start()  # the tree's warm-up is starting the kernel zygote in the background now
    print("STARTED", os.getpid(), flush=True)
    raise RuntimeError("the program failed before it stopped its agent")

asyncio.run(main())
"""


async def test_a_program_that_raises_after_start_exits_and_leaves_no_process(workdir: Path) -> None:
    # asyncio.run() cancels every task at exit; the zygote's start, caught mid-way, used to hang it for ever
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PROGRAM_THAT_RAISES, str(workdir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=workdir,  # what it starts runs here too: that is how the leftovers are found below
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 1 and b"STARTED" in stdout
    assert b"RuntimeError: the program failed before it stopped its agent" in stderr
    assert b"was dropped while started" in stderr and b"Exception ignored" not in stderr
    assert not [p.pid for p in await asyncio.to_thread(running_in, workdir)]


def running_in(folder: Path) -> list[psutil.Process]:
    """Processes (of any parent: a leftover is adopted by init) whose working folder is `folder`."""
    found = []
    for candidate in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if candidate.status() != psutil.STATUS_ZOMBIE and Path(candidate.cwd()) == folder:
                found.append(candidate)
    return found
