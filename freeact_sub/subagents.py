"""The `task` tool: run a child agent for an isolated job and return only its final answer.

A child has its parent's model, model settings, system prompt and MCP configuration, but a
fresh kernel (from the tree's pool), new MCP connections, its own id and no `task` tool. At
most `max_subagents` children exist at once in the tree: the bound is taken before the child's
kernel is acquired. Every event of the child flows into the parent's stream tagged with the
child's id; `SubagentStarted` / `SubagentFinished` (tagged with the parent's id) frame its life.
Whatever happens in the child (done, failed, cancelled, turn limit) it is stopped at once when
it ends. Children are built and registered by the `AgentTree`; this module never needs `Agent`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable

from .events import AgentEvent, ApprovalRequest, Response, SubagentFinished, SubagentStarted, SubagentStatus
from .tree import AgentTree, ChildSpec, TreeMember

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

    async def run(
        self, tool_call_id: str, prompt: str, max_turns: int, emit: Callable[[AgentEvent], None]
    ) -> tuple[str, bool]:
        """Run one child to its end; returns the `task` call's result and whether it is an error.

        The result is an error when the child failed, stopped at its turn limit, or stopped
        because the user rejected one of its calls: the parent model should not take it for
        a finished job.
        """
        parent, tree = self._parent, self._tree
        await tree.bound.acquire()  # before the child's kernel exists: at most max_subagents child kernels
        try:
            config = parent.config.model_copy(update={"model": parent.model, "enable_subagents": False})
            child = tree.new_child(
                ChildSpec(config=config, parent_id=parent.agent_id, tool_call_id=tool_call_id, prompt=prompt)
            )
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
                tree.refill(config)
                answer = ""
                requests: list[ApprovalRequest] = []
                async with contextlib.aclosing(child.stream(prompt, max_turns=max_turns)) as events:
                    async for event in events:
                        emit(event)
                        if isinstance(event, Response) and event.final:
                            answer = event.content
                        elif isinstance(event, ApprovalRequest) and event.agent_id == child.agent_id:
                            requests.append(event)
                if child.last_turn_rejected:
                    status = "rejected"
                    return _rejected_result(child.agent_id, requests), True
                if child.turn_limit_reached:
                    status = "turn_limit"
                    limit = f"{max_turns} turn{'s' if max_turns != 1 else ''}"
                    return f"[The subagent {child.agent_id} reached its limit of {limit}.]\n{answer}".strip(), True
                status = "done"
                if not answer.strip():
                    return f"The subagent {child.agent_id} finished, but its final response was empty.", False
                return answer, False
            except asyncio.CancelledError:
                status = "cancelled"
                raise
            except Exception as exc:
                return f"The subagent {child.agent_id} failed: {type(exc).__name__}: {exc}", True
            finally:
                tree.unregister(child.agent_id)
                await asyncio.shield(child.stop())
                child.finished(status)
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


def _rejected_result(child_id: str, requests: list[ApprovalRequest]) -> str:
    """What the parent reads when the user rejected a call of its child: who, what, and that the job is unfinished."""
    rejected = [r for r in requests if r.decision is False and r.reason is None]
    described = []
    for request in rejected:
        what = f"`{request.tool_name}`"
        if request.code is not None:
            code = request.code if len(request.code) <= 300 else request.code[:300] + " …"
            what += f" with the code:\n```python\n{code}\n```"
        elif request.tool_args:
            what += f" with the arguments {json.dumps(request.tool_args)[:300]}"
        described.append(what)
    calls = "; ".join(described) if described else "one of its calls"
    return (
        f"The user rejected the subagent {child_id}'s call to {calls}. The call did not run, and the "
        f"subagent stopped without finishing its task."
    )
