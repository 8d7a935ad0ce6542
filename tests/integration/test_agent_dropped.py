"""An agent dropped while started (never stopped) does not leak its processes, and a warning says so."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from freeact_sub import Agent, AgentConfig
from tests.processes import is_gone
from tests.scripting import Script

pytestmark = pytest.mark.timeout(120)


async def test_a_dropped_agent_is_stopped_on_its_loop(workdir: Path) -> None:
    agent = Agent(AgentConfig(model=Script().model, working_dir=workdir, kernel_pool_size=0))
    await agent.start()
    zygote = agent.tree.supplies.zygote
    # The kernel zygote starts in the background; until that task ends it refers to the tree and
    # so to the agent, which could not be collected below (seen in a loaded run: DID NOT WARN).
    warming = agent.tree.supplies._warming
    assert warming is not None
    await warming
    del warming
    assert zygote.running
    pids = [agent.kernel.pid, zygote.pid]
    del zygote
    agent_id = agent.agent_id
    with pytest.warns(RuntimeWarning, match=f"{agent_id} was dropped while started"):
        del agent
        gc.collect()
    for _ in range(200):  # the agent is stopped by a task on this loop
        await asyncio.sleep(0.05)
        if all([await is_gone(pid, wait=0) for pid in pids]):
            break
    assert all([await is_gone(pid) for pid in pids])
