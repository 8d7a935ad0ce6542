"""A run's lifecycle: a model round (a turn) starts, the run is cancelled, a hook failed on the way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .base import AgentEvent

__all__ = ["ContextCompacted", "HookFailed", "Rewound", "RunCancelled", "TurnStarted"]


@dataclass(frozen=True, kw_only=True)
class TurnStarted(AgentEvent):
    """A model round begins: one model response plus the tool calls it makes is one turn."""

    turn: int
    """1 for the first round of this `stream()` call, 2 for the next, and so on."""



@dataclass(frozen=True, kw_only=True)
class RunCancelled(AgentEvent):
    """The run (one `stream()` call) was cancelled (`Agent.cancel()`, a closed stream, a new `stream()`).

    The history keeps what completed; unfinished calls are answered as interrupted by the user,
    and a note says the run was interrupted.
    """

    reason: str = "cancelled"


@dataclass(frozen=True, kw_only=True)
class HookFailed(AgentEvent):
    """A hook failed (raised, exited non-zero, answered no JSON object, or timed out); nothing it said counts.

    The moment went on as if the hook did not exist: a tool call it was asked about goes to the
    rules and the person as usual. `agent_id` is the agent whose moment it was.
    """

    hook_event_name: str
    """`PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `SubagentStart`, `SubagentStop`, `Stop` or `PreCompact`."""
    hook: str
    """The hook's label: its command, or the callable's name."""
    message: str
    """What went wrong."""
    tool_call_id: str | None = None
    """For the tool moments: the call it was asked about."""


@dataclass(frozen=True, kw_only=True)
class ContextCompacted(AgentEvent):
    """The agent's history was compacted: its older rounds became a summary the model wrote; the latest stay.

    Emitted after the summary replaced them (a saved session keeps the full record as well).
    """

    trigger: Literal["auto", "manual", "overflow"]
    """`auto`: the next request would have passed `compact_at` of the window; `manual`: `Agent.compact()` or
    `/compact`; `overflow`: the provider refused a request as longer than the model's context window."""
    tokens_before: int
    """The history's tokens before (the provider's count of the latest request plus an estimate of the rest)."""
    tokens_after: int
    """The compacted history's tokens (estimated: four characters a token)."""
    context_window: int | None
    """The model's context window in tokens, where known."""
    summary: str
    """The summary the model wrote."""
    messages_summarized: int
    """Messages of the history the summary replaced."""
    messages_kept: int
    """Messages kept verbatim after it (the latest rounds)."""
    focus: str | None = None
    """What the summary was asked to focus on (`/compact <focus>`, `Agent.compact(focus=…)`, a hook's note)."""
    started: float | None = None
    """When the compaction began (`time.time()`); `at` is when it ended."""

    @property
    def reason(self) -> str:
        """Why, in a few words: `window nearly full`, `asked`, `the provider refused a request as too long`."""
        return _WHY.get(self.trigger, self.trigger)


_WHY = {"auto": "window nearly full", "manual": "asked", "overflow": "the provider refused a request as too long"}


@dataclass(frozen=True, kw_only=True)
class Rewound(AgentEvent):
    """The working folder and the conversation went back to before a turn (`Agent.rewind`, `/rewind`).

    The kernel was restarted (its state cannot go back); the model is told so in its next request. Rewinding
    to `undo` undoes this rewind.
    """

    checkpoint: int
    """The checkpoint (turn) rewound to."""
    undo: int
    """The checkpoint taken just before this rewind: `Agent.rewind(undo)` brings back what it replaced."""
    restored: tuple[str, ...] = ()
    """Paths written back to their version at the checkpoint."""
    removed: tuple[str, ...] = ()
    """Paths removed: they were not there at the checkpoint."""
    failed: tuple[tuple[str, str], ...] = ()
    """Paths that could not be restored, and why (a link in the way is never followed)."""
    messages_removed: int = 0
    """Messages of the conversation that came after the checkpoint and are gone from it."""
    kernel_restarted: bool = True
    """Whether the agent's kernel was restarted (all of its variables are gone)."""

    @property
    def content(self) -> str:
        """One line for the person."""
        files = len(self.restored) + len(self.removed)
        text = (f"Rewound to checkpoint {self.checkpoint}: {files} path(s) restored, {self.messages_removed} "
                f"message(s) taken back" + ("; the kernel was restarted" if self.kernel_restarted else ""))
        if self.failed:
            text += "; not restored: " + ", ".join(f"{path} ({why})" for path, why in self.failed)
        return text + f". /rewind {self.undo} undoes it."
