"""Stop an agent that a notebook cell replaced, instead of leaking its processes.

Re-running the cell `agent = Agent(config); await agent.start(); view = AgentView(agent)` binds
the names to a new agent; the old one would keep its kernel, kernel zygote, pooled kernels and
MCP servers until the notebook's kernel ends. After each cell, an agent that was started and
held by a name of the notebook before the cell (directly or through an `AgentView`), and that
no name holds any more, is stopped, and the cell says so.

"Holds" looks at the notebook's names, one level into lists, tuples, sets, dicts and plain
objects' attributes, so an agent kept in `agents = [a, b]` or `app.agent` stays alive.
IPython's own names (`Out`, `_`, `_3`, …) do not count: displaying a view must not pin its agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import Any

from freeact_sub import Agent

__all__ = ["watch"]

_watched: set[int] = set()
"""ids of the IPython shells this module already hooks into."""
_before: dict[str, Agent] = {}
_stopping: set[asyncio.Task[None]] = set()


def watch() -> None:
    """Hook into the running IPython shell (once); does nothing outside IPython."""
    from IPython.core.getipython import get_ipython

    shell = get_ipython()
    if shell is None or id(shell) in _watched:
        return
    _watched.add(id(shell))
    shell.events.register("pre_run_cell", lambda *_: _remember(shell))
    shell.events.register("post_run_cell", lambda *_: _stop_replaced(shell))


def _names(shell: Any) -> Mapping[str, Any]:
    hidden = shell.user_ns_hidden
    return {k: v for k, v in shell.user_ns.items() if not k.startswith("_") and k not in hidden}


def _agent_of(value: object) -> Agent | None:
    if isinstance(value, Agent):
        return value
    agent = getattr(type(value), "__name__", "") == "AgentView" and getattr(value, "agent", None)
    return agent if isinstance(agent, Agent) else None


def _held(value: object) -> Iterator[Agent]:
    """The agents `value` holds: itself, its view's agent, or one level into a container or object."""
    if (agent := _agent_of(value)) is not None:
        yield agent
        return
    if isinstance(value, Mapping):
        inner: Any = value.values()
    elif isinstance(value, (list, tuple, set, frozenset)):
        inner = value
    else:
        inner = getattr(value, "__dict__", {}).values() if not isinstance(value, type) else ()
    for item in inner:
        if (agent := _agent_of(item)) is not None:
            yield agent


def _remember(shell: Any) -> None:
    _before.clear()
    for name, value in _names(shell).items():
        if (agent := _agent_of(value)) is not None and agent.started:
            _before[name] = agent


def _stop_replaced(shell: Any) -> None:
    if not _before:
        return
    held = {id(agent) for value in _names(shell).values() for agent in _held(value)}
    gone = {id(agent): agent for agent in _before.values() if id(agent) not in held and agent.started}
    _before.clear()
    for agent in gone.values():
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            print(f"{agent.agent_id} was replaced but is still running: call `await agent.stop()` on it.")
            continue
        print(
            f"Stopped {agent.agent_id}: no name of the notebook holds it any more, "
            "so its kernel, its subagents' kernels and its MCP servers end."
        )
        task = loop.create_task(agent.stop(), name=f"stop-replaced:{agent.agent_id}")
        _stopping.add(task)
        task.add_done_callback(_stopping.discard)
