"""What happens to an agent dropped while started: it is stopped anyway, and a warning says so.

`Agent.__del__` calls `release()` for an agent whose `stop()` never ran (a notebook cell that
replaced it, a script that forgot `async with`). On the agent's event loop, if it still runs,
the agent is stopped as usual (turn, subagents, kernel pool, kernel, MCP servers);
with the loop gone, its kernel is killed by PID, the last thing left to do (the process's kernel
zygote is shared by every agent and closes at exit).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import warnings
from collections.abc import Awaitable
from typing import Protocol

__all__ = ["Droppable", "release"]


class Droppable(Protocol):
    """What `release` needs of an agent: its id, `stop()`, and the processes to kill when no loop is left."""

    agent_id: str

    def stop(self) -> Awaitable[None]: ...

    def own_processes(self) -> list[int]: ...

_stopping: set[asyncio.Task[None]] = set()


def release(agent: Droppable, loop: asyncio.AbstractEventLoop | None) -> None:
    """Stop `agent`, which the garbage collector is about to free while it is started."""
    warnings.warn(
        f"{agent.agent_id} was dropped while started: its kernel, subagents and MCP servers are stopped now. "
        "Stop an agent with `await agent.stop()` (or use `async with Agent(...)`).",
        RuntimeWarning,  # shown by default (a ResourceWarning is not): the person should hear of it
        stacklevel=2,
    )
    if loop is not None and not loop.is_closed() and loop.is_running():
        loop.call_soon_threadsafe(_stop_on_loop, agent, loop)
        return
    for pid in agent.own_processes():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _stop_on_loop(agent: Droppable, loop: asyncio.AbstractEventLoop) -> None:
    task = loop.create_task(_stopped(agent), name=f"stop-dropped:{agent.agent_id}")
    _stopping.add(task)
    task.add_done_callback(_stopping.discard)


async def _stopped(agent: Droppable) -> None:
    await agent.stop()
