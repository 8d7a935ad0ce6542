"""The `task` tool: run a child agent for an isolated job and return only its final answer.

A child has its parent's model, model settings, system prompt and MCP configuration, but a
fresh kernel (from the tree's pool), new MCP connections, its own id and no `task` tool. At
most `max_subagents` children exist at once in the tree: the bound is taken before the child's
kernel is acquired. Every event of the child flows into the parent's stream tagged with the
child's id; `SubagentStarted` / `SubagentFinished` (tagged with the parent's id) frame its life.
Whatever happens in the child (done, failed, cancelled, turn limit) it is stopped at once when
it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from .events import AgentEvent, Response, SubagentFinished, SubagentStarted, SubagentStatus
from .tree import AgentTree, TreeMember

__all__ = ["SubagentRunner"]


class SubagentRunner:
    """Starts and cleans up the children of one agent, through its tree."""

    def __init__(self, tree: AgentTree, parent: TreeMember) -> None:
        self._tree = tree
        self._parent = parent

    @property
    def running(self) -> dict[str, TreeMember]:
        """The children of this agent alive now, by agent id."""
        return {record.agent_id: record.agent for record in self._tree.children(self._parent.agent_id)}

    async def run(self, tool_call_id: str, prompt: str, max_turns: int, emit: Callable[[AgentEvent], None]) -> str:
        """Run one child to its end and return the text that becomes the `task` call's result."""
        parent, tree = self._parent, self._tree
        await tree.bound.acquire()  # before the child's kernel exists: at most max_subagents child kernels
        try:
            config = parent.config.model_copy(update={"model": parent.model, "enable_subagents": False})
            child = tree.new_child(parent.agent_id, config)
            started = time.monotonic()
            status: SubagentStatus = "failed"
            emit(
                SubagentStarted(
                    agent_id=parent.agent_id,
                    subagent_id=child.agent_id,
                    tool_call_id=tool_call_id,
                    prompt=prompt,
                    max_turns=max_turns,
                )
            )
            try:
                await child.start()
                tree.pool.fill()  # top up only now: booting a kernel would slow this child's own MCP start
                answer = ""
                async with contextlib.aclosing(child.stream(prompt, max_turns=max_turns)) as events:
                    async for event in events:
                        emit(event)
                        if isinstance(event, Response) and event.final:
                            answer = event.content
                if child.turn_limit_reached:
                    status = "turn_limit"
                    return f"[The subagent {child.agent_id} reached its limit of {max_turns} turns.]\n{answer}"
                status = "rejected" if child.last_turn_rejected else "done"
                return answer
            except asyncio.CancelledError:
                status = "cancelled"
                raise
            except Exception as exc:
                return f"The subagent {child.agent_id} failed: {type(exc).__name__}: {exc}"
            finally:
                tree.unregister(child.agent_id)
                await asyncio.shield(child.stop())
                emit(
                    SubagentFinished(
                        agent_id=parent.agent_id,
                        subagent_id=child.agent_id,
                        tool_call_id=tool_call_id,
                        status=status,
                        turns_used=child.turns_used,
                        elapsed=time.monotonic() - started,
                        usage=tree.usage.of(child.agent_id),
                    )
                )
        finally:
            tree.bound.release()

    async def close(self) -> None:
        """Stop every running child of this agent."""
        children = list(self.running.values())
        await asyncio.gather(*(c.stop() for c in children), return_exceptions=True)
