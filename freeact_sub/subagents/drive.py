"""One child from its slot to its end: queued for a slot, announced, started, its turn streamed to its parent,
stopped, and its end told (`SubagentFinished`, the `SubagentStart` / `SubagentStop` hooks)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from ..events import (
    ApprovalRequest,
    Emit,
    Response,
    SubagentFinished,
    SubagentQueued,
    SubagentStarted,
    SubagentStatus,
)
from ..tools.names import tool_allowed
from ..tree.registry import ChildSpec, TreeMember
from ..workspaces import KEPT_FOLDER
from .change_sets import settle
from .jobs import Job, Jobs
from .results import outcome

__all__ = ["drive"]



async def drive(
    jobs: Jobs, child: TreeMember, spec: ChildSpec, max_turns: int, emit: Emit, job: Job | None = None
) -> tuple[str, bool]:
    """Take a slot, start the child, run its turn and stop it; returns the result and whether it is an error."""
    parent, tree = jobs.parent, jobs.tree
    record = tree.agents[child.agent_id]
    started = time.monotonic()
    status: SubagentStatus = "failed"
    announced = False
    queued = tree.bound.locked()
    if queued:
        emit(SubagentQueued(agent_id=parent.agent_id, subagent_id=child.agent_id, tool_call_id=spec.tool_call_id,
                            prompt=spec.prompt, agent_type=spec.agent_type, description=spec.description))
    try:
        await tree.bound.acquire()  # before the child's kernel exists: at most max_subagents child kernels
    except BaseException:  # stopped while it waited for a slot
        if queued:
            emit(SubagentFinished(agent_id=parent.agent_id, subagent_id=child.agent_id,
                                  tool_call_id=spec.tool_call_id, status="cancelled", turns_used=0, elapsed=0.0,
                                  waited=time.monotonic() - started))
        if job is not None:
            job.status = "cancelled"
            if job.background:
                jobs.background_ended(job, None, record.stopped_by)  # queued before it leaves the list
            else:
                job.elapsed = time.monotonic() - job.started_at
                job.finished.set()
        tree.unregister(child.agent_id)
        raise
    result: tuple[str, bool] | None = None
    waited = time.monotonic() - started if queued else 0.0
    started = time.monotonic()
    try:
        record.state = "starting"
        runs_code = tool_allowed("execute_ipython_cell", child.settings.tools, child.settings.disallowed_tools)
        emit(
            SubagentStarted(
                agent_id=parent.agent_id,
                subagent_id=child.agent_id,
                tool_call_id=spec.tool_call_id,
                prompt=spec.prompt,
                max_turns=max_turns,
                agent_type=spec.agent_type,
                description=spec.description,
                model=getattr(spec.config.model, "model_name", str(spec.config.model)),
                # a type that runs no code has no kernel to confine: no profile to show
                sandbox=spec.sandbox.name if runs_code else "",
                sandbox_limits=_limits(spec) if runs_code else "",
            )
        )
        announced = True
        if child.hooks.wants("SubagentStart"):
            fields = _subagent_fields(spec, child.agent_id)
            await child.hooks.ask("SubagentStart", child.hook_context(), fields, emit)
        await child.start()
        tree.refill_after_first_request(child.agent_id, spec.config)
        record.state = "running"
        answer = ""
        requests: list[ApprovalRequest] = []
        async with contextlib.aclosing(child.stream(spec.prompt, max_turns=max_turns)) as events:
            async for event in events:
                emit(event)
                if isinstance(event, Response) and event.final and event.agent_id == child.agent_id:
                    answer = event.content
                elif isinstance(event, ApprovalRequest) and event.agent_id == child.agent_id:
                    requests.append(event)
        status, result = outcome(child, answer, requests, max_turns)
        if spec.workspace is not None:  # its kernel stops first: nothing writes its workspace while it is read
            await child.stop()
            session = parent.conversation.session_folder
            keep_in = session / KEPT_FOLDER / child.agent_id if session is not None else None
            result = await settle(spec.workspace, child.agent_id, spec.tool_call_id, result, emit, jobs.ask,
                                  tree.journal, keep_in)
        return result
    except asyncio.CancelledError:
        status = "cancelled"
        raise
    except Exception as exc:
        result = (f"The subagent {child.agent_id} failed: {type(exc).__name__}: {exc}", True)
        if spec.workspace is not None:
            result = (result[0] + f"\n[Its workspace, with what it wrote, stays in {spec.workspace.upper}.]", True)
        return result
    finally:
        if job is not None:
            job.status = status
            job.unread = child.inbox.drop_unread()
            if job.background:
                jobs.background_ended(job, result, record.stopped_by)
        tree.unregister(child.agent_id)
        tree.workspaces.pop(child.agent_id, None)
        stopping = asyncio.ensure_future(child.stop())
        try:
            await asyncio.shield(stopping)
        except BaseException:  # cancelled while it stops: its slot is free once it has stopped
            stopping.add_done_callback(lambda _: tree.bound.release())
            raise
        child.conversation.close(status, turns=child.turns.turns_used)
        if job is not None:
            job.elapsed = time.monotonic() - job.started_at
            job.turns = child.turns.turns_used
            if not job.background:
                job.finished.set()
        if status != "failed" or child.history:
            jobs.ended[child.agent_id] = child
        if announced:
            emit(
                SubagentFinished(
                    agent_id=parent.agent_id,
                    subagent_id=child.agent_id,
                    tool_call_id=spec.tool_call_id,
                    status=status,
                    turns_used=child.turns.turns_used,
                    elapsed=time.monotonic() - started,
                    usage=tree.usage.of(child.agent_id),
                    waited=waited,
                )
            )
        tree.bound.release()  # its kernel is gone and its end is told: the next child does not wait for its hooks
        if announced:
            if child.hooks.wants("SubagentStop"):
                used = tree.usage.of(child.agent_id)
                usage = {"input_tokens": used.input_tokens, "output_tokens": used.output_tokens,
                         "cost": float(used.cost) if used.cost is not None else None}
                fields = {**_subagent_fields(spec, child.agent_id), "status": status,
                          "turns_used": child.turns.turns_used, "usage": usage}
                with contextlib.suppress(Exception):
                    await asyncio.shield(child.hooks.ask("SubagentStop", child.hook_context(), fields, emit))


def _limits(spec: ChildSpec) -> str:
    """The child's sandbox limits as its start shows them, its workspace first (the mechanism named)."""
    view = spec.workspace.describe() if spec.workspace is not None else ""
    return "; ".join(part for part in (view, spec.sandbox.detail()) if part)


def _subagent_fields(spec: ChildSpec, child_id: str) -> dict[str, Any]:
    """What the `SubagentStart` and `SubagentStop` hooks are told about a child besides its context."""
    model = spec.config.model
    return {"subagent_id": child_id, "model": getattr(model, "model_name", str(model)), "prompt": spec.prompt,
            "description": spec.description, "parent_tool_use_id": spec.tool_call_id}
