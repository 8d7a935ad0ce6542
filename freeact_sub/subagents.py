"""The `task` tool: run a child agent for an isolated job and return only its final answer.

A child has its parent's model, model settings, system prompt and MCP configuration, but a
fresh kernel (from the pool), new MCP connections, its own id and no `task` tool. At most
`max_subagents` children exist at once: the bound is taken before the child's kernel is
acquired. Every event of the child flows into the parent's stream tagged with the child's id;
`SubagentStarted` / `SubagentFinished` (tagged with the parent's id) frame its life. Whatever
happens in the child (done, failed, cancelled, turn limit) it is stopped at once when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .events import AgentEvent, ApprovalRequest, Response, SubagentFinished, SubagentStarted, SubagentStatus
from .kernel_launcher import KernelZygote
from .kernel_pool import KernelPool
from .mcp_pool import McpPool

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["SubagentRunner"]


class SubagentRunner:
    """Starts, bounds and cleans up the children of one agent."""

    def __init__(self, parent: Agent) -> None:
        self._parent = parent
        self._bound = asyncio.Semaphore(parent.config.max_subagents)
        self._zygote = KernelZygote()
        self._pool = KernelPool(lambda: parent._new_kernel(launcher=self._zygote), parent.config.kernel_pool_size)
        self._mcp_pool = McpPool(parent.config.mcp_pool_size)
        self.running: dict[str, Agent] = {}
        """The children alive now, by agent id."""
        self._warming: asyncio.Task[None] | None = None

    def start(self) -> None:
        """In the background: open the MCP pool's connections; start the kernel zygote, then fill the kernel pool."""
        self._mcp_pool.fill(self._parent.config.mcp_servers, self._parent.config.working_dir)
        self._warming = asyncio.create_task(self._warm_up(), name="subagents-warm-up")

    async def _warm_up(self) -> None:
        with contextlib.suppress(Exception):  # without a zygote, kernels are launched the ordinary way
            await self._zygote.start()
        self._pool.fill()

    async def run(
        self, tool_call_id: str, prompt: str, max_turns: int, emit: Callable[[AgentEvent], None]
    ) -> tuple[str, bool]:
        """Run one child to its end; returns the `task` call's result and whether it is an error.

        The result is an error when the child failed, stopped at its turn limit, or stopped
        because the user rejected one of its calls: the parent model should not take it for
        a finished job.
        """
        from .agent import Agent

        parent = self._parent
        await self._bound.acquire()  # before the child's kernel exists: at most max_subagents child kernels
        try:
            config = parent.config.model_copy(update={"model": parent._model, "enable_subagents": False})
            child = Agent(config, approvals=parent.approvals)
            child._is_subagent = True
            child._ledger = parent._ledger
            if parent._log is not None:  # the child's conversation is saved in its parent's session
                child._log = parent._log.child(
                    child.agent_id, tool_call_id=tool_call_id, prompt=prompt, model=parent._model
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
            self.running[child.agent_id] = child
            try:
                await child._start(acquire_kernel=self._pool.acquire, mcp_pool=self._mcp_pool)
                # top up only now: booting a kernel or a server would slow this child's own start
                self._pool.fill()
                self._mcp_pool.fill(config.mcp_servers, config.working_dir)
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
                self.running.pop(child.agent_id, None)
                await asyncio.shield(child.stop())
                if child._log is not None:
                    child._log.sync(child._history)
                    child._log.status(status, turns=child.turns_used, ended=True)
                    child._log.close()
                emit(
                    SubagentFinished(
                        agent_id=parent.agent_id,
                        subagent_id=child.agent_id,
                        tool_call_id=tool_call_id,
                        status=status,
                        turns_used=child.turns_used,
                        elapsed=time.monotonic() - started,
                        usage=parent._ledger.of(child.agent_id),
                    )
                )
        finally:
            self._bound.release()

    async def close(self) -> None:
        """Stop every running child and shut the kernel pool down."""
        if self._warming is not None and not self._warming.done():
            self._warming.cancel()
            with contextlib.suppress(BaseException):
                await self._warming
        children = list(self.running.values())
        await asyncio.gather(
            *(c.stop() for c in children), self._pool.close(), self._mcp_pool.close(), return_exceptions=True
        )
        await self._zygote.close()


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
