"""A turn's lifecycle: a model round starts, the turn is cancelled, a hook failed on the way."""

from __future__ import annotations

from dataclasses import dataclass

from .base import AgentEvent

__all__ = ["HookFailed", "RunCancelled", "TurnStarted"]


@dataclass(frozen=True, kw_only=True)
class TurnStarted(AgentEvent):
    """A model round begins: one model response plus the tool calls it makes is one turn."""

    turn: int
    """1 for the first round of this `stream()` call, 2 for the next, and so on."""



@dataclass(frozen=True, kw_only=True)
class RunCancelled(AgentEvent):
    """The turn was cancelled (`Agent.cancel()`, a closed stream, a new `stream()`).

    The history keeps what completed; unfinished calls are answered as interrupted by the user,
    and a note says the turn was interrupted.
    """

    reason: str = "cancelled"


@dataclass(frozen=True, kw_only=True)
class HookFailed(AgentEvent):
    """A hook failed (raised, exited non-zero, answered no JSON object, or timed out); nothing it said counts.

    The moment went on as if the hook did not exist: a tool call it was asked about goes to the
    rules and the person as usual. `agent_id` is the agent whose moment it was.
    """

    hook_event_name: str
    """`PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `SubagentStart`, `SubagentStop` or `Stop`."""
    hook: str
    """The hook's label: its command, or the callable's name."""
    message: str
    """What went wrong."""
    tool_call_id: str | None = None
    """For the tool moments: the call it was asked about."""
