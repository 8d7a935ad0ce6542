"""The children one agent started: each as a `Job` (foreground or background, running or ended), and the
answers to `task_output`, `task_stop` and `task_list` about them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..events import SubagentStatus
from ..tree.registry import AgentTree, TreeMember
from .results import stopped_result

__all__ = ["Job", "Jobs"]

@dataclass
class Job:
    """A child of this agent (in the foreground or the background), running or ended."""

    agent_id: str
    description: str
    agent_type: str
    started_at: float
    background: bool = False
    model: str = ""
    """The name of the model it runs on."""
    task: asyncio.Task[None] | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    status: SubagentStatus | None = None
    result: str = ""
    said: str = ""
    """What it has said so far (its model's text), for `task_output` while it runs."""
    elapsed: float = 0.0
    turns: int = 0
    """Model rounds it used (set when it ends)."""
    told: bool = False
    """Whether the parent's model has been told how it ended (by `task_output`, or `task_stop` said it won't be)."""
    unread: int = 0
    """Messages sent to it (`task_send`, the person's) that it ended before reading."""

    @property
    def note(self) -> str:
        """What the parent's model reads, once, when this background child has ended."""
        unread = ""
        if self.unread:
            plural = "s" if self.unread != 1 else ""
            unread = f" It ended before it read {self.unread} message{plural} sent to it."
        ended = f"[The background subagent {self.agent_id} has ended ({self.status}).{unread} Its result:]"
        return f"{ended}\n{self.result}"


class Jobs:
    """The children of one agent, and the notes on background ones its model has not been told of yet."""

    def __init__(self, tree: AgentTree, parent: TreeMember) -> None:
        self.tree = tree
        self.parent = parent
        self.background: dict[str, Job] = {}
        """The background children (`task_output` and `task_stop` manage these only)."""
        self.children: dict[str, Job] = {}
        """Every child this agent started, foreground and background, running or ended (for `task_list`)."""
        self.notes: list[str] = []
        """Background children that ended (or reported) and whose news the parent's model has not been told."""
        self.ended: dict[str, TreeMember] = {}
        """Children that finished, by id (to resume them)."""
        self.started_children = 0
        """New children this agent started over its life (resumed ones are not new), for `max_children`."""
        self.ask: Callable[..., Awaitable[Any]] | None = None
        """The parent's gate (`ApprovalGate.ask`): asks whether a child's change set is applied."""

    @property
    def running(self) -> dict[str, TreeMember]:
        """The children of this agent alive now, by agent id."""
        return {record.agent_id: record.agent for record in self.tree.children(self.parent.agent_id)}

    def take_notes(self) -> list[str]:
        """The notes on background children that ended since the model was last told (each handed out once)."""
        notes, self.notes = self.notes, []
        return notes

    def put_back(self, notes: list[str]) -> None:
        """Notes whose model request failed: told at the next one instead."""
        self.notes[:0] = notes

    def background_ended(self, job: Job, outcome: tuple[str, bool] | None, stopped_by: str | None) -> None:
        """Record a background child's end and queue its note, before it leaves the tree's registry.

        Queued first, dropped after: a consumer that sees the child gone from `subagents()` and
        starts the next round finds the note there. `outcome` is None when it was cancelled.
        """
        job.elapsed = time.monotonic() - job.started_at
        if outcome is None:
            job.result = stopped_result(job.agent_id, stopped_by, job.said)
        else:
            job.result = outcome[0]
        job.finished.set()
        if outcome is None and stopped_by is None:
            return  # the parent itself is stopping: nobody is left to tell
        if not job.told:
            self.notes.append(job.note)

    def own(self, agent_id: str) -> Job | str:
        job = self.background.get(agent_id)
        if job is not None:
            return job
        if agent_id in self.tree.agents:
            return f"{agent_id} is not a background subagent that you started; you can only manage your own."
        return f"There is no subagent {agent_id!r} of yours. `task_list` lists them."

    async def output(self, agent_id: str, wait: bool, timeout: float) -> tuple[str, bool]:
        job = self.own(agent_id)
        if isinstance(job, str):
            return job, True
        if wait and not job.finished.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.finished.wait(), timeout)
        if job.finished.is_set():
            job.told = True
            if job.note in self.notes:
                self.notes.remove(job.note)  # the model has it now: no need to tell it again
            return f"The subagent {agent_id} has ended ({job.status}). Its result:\n{job.result}", job.status != "done"
        record = self.tree.agents.get(agent_id)
        state = record.state if record else "ending"
        turns = record.agent.turns.turns_used if record else 0
        said = job.said.strip() or "(nothing yet)"
        return (
            f"The subagent {agent_id} is still {state} ({turns} turns, {time.monotonic() - job.started_at:.0f} s). "
            f"The end of what it has said so far:\n{said}"
        ), False

    def stop(self, agent_id: str) -> tuple[str, bool]:
        job = self.own(agent_id)
        if isinstance(job, str):
            return job, True
        if job.finished.is_set():
            return f"The subagent {agent_id} had already ended ({job.status}).", False
        job.told = True  # what this answer says is all the model hears of it
        self.tree.cancel(agent_id, by="its parent")
        return f"The subagent {agent_id} is being stopped; you will not be told about it again.", False

    def listing(self) -> str:
        """Every child of this agent, foreground and background, running and ended, oldest first.

        Children of an earlier process of a resumed session come first, from the session's index.
        """
        saved_children = self.parent.conversation.saved_children()
        earlier = [saved for saved in saved_children if saved.agent_id not in self.children]
        if not self.children and not earlier:
            return "You have started no subagents."
        lines = [
            f"{saved.agent_id} type={saved.agent_type} earlier-session state={saved.status} turns={saved.turns} "
            f"tokens={saved.total_tokens} (can be resumed with `task(resume=...)`)"
            for saved in earlier
        ]
        for job in self.children.values():
            record = self.tree.agents.get(job.agent_id)
            state = record.state if record else (job.status or "ending")
            turns = record.agent.turns.turns_used if record else job.turns
            elapsed = time.monotonic() - job.started_at if record else job.elapsed
            used = self.tree.usage.of(job.agent_id)
            lines.append(
                f"{job.agent_id} type={job.agent_type} {'background' if job.background else 'foreground'} "
                f"state={state} turns={turns} "
                f"elapsed={elapsed:.0f}s tokens={used.total_tokens} model={job.model}"
                + (f" description={job.description!r}" if job.description else "")
            )
        return "\n".join(lines)
