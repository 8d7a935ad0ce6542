"""A child agent's life as its parent's stream shows it: queued, started, messaged, reporting, finished."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..usage import Usage
from .base import AgentEvent, FormerlySubagentType, FormerlyText

__all__ = [
    "SubagentFinished", "SubagentMessage", "SubagentQueued", "SubagentReport", "SubagentStarted", "SubagentStatus",
]


SubagentStatus = Literal["done", "failed", "cancelled", "turn_limit", "rejected"]


@dataclass(frozen=True, kw_only=True)
class SubagentStarted(AgentEvent, FormerlySubagentType):
    """A `task` call started a child agent. `agent_id` is the parent's id."""

    subagent_id: str
    """The child's agent id: every event the child produces carries it."""
    tool_call_id: str
    """The parent's `task` call that started the child; the child's result is a `ToolOutput` with this id."""
    prompt: str
    max_turns: int
    agent_type: str = "general"
    """The agent type the child runs as."""
    description: str = ""
    """The `task` call's short title for the job (3-5 words); empty if the model gave none."""
    model: str = ""
    """The name of the model the child talks to, as sent to its provider."""
    sandbox: str = ""
    """The sandbox profile the child's kernel runs under (`workspace`, `read-only`, `off`, …); empty for a type that
    runs no code (it has no kernel)."""
    sandbox_limits: str = ""
    """What that profile lets the kernel reach and take: `hosts: pypi.org; memory 4 GiB, 256 processes, 60 s a
    cell` (empty with `sandbox`, or under `off`)."""


@dataclass(frozen=True, kw_only=True)
class SubagentQueued(AgentEvent, FormerlySubagentType):
    """A `task` call's child waits for a slot: `max_subagents` children run already. `agent_id` is the parent's id.

    `SubagentStarted` follows once a slot is free (or `SubagentFinished` with status `cancelled`
    if it is stopped while it waits).
    """

    subagent_id: str
    tool_call_id: str
    prompt: str
    agent_type: str = "general"
    description: str = ""


@dataclass(frozen=True, kw_only=True)
class SubagentFinished(AgentEvent):
    """A child agent ended; its kernel is shut down and its MCP connections closed. `agent_id` is the parent's id."""

    subagent_id: str
    tool_call_id: str
    status: SubagentStatus
    turns_used: int
    elapsed: float
    """Seconds it ran: from its start (a slot taken) to its end."""
    usage: Usage = field(default_factory=Usage)
    """The child's tokens and cost over its life."""
    waited: float = 0.0
    """Seconds it waited for a slot before it started (0 when one was free)."""


@dataclass(frozen=True, kw_only=True)
class SubagentMessage(AgentEvent, FormerlyText):
    """A message sent to a running background child: by its parent's model (`task_send`) or by the person
    (`Agent.send`, `/send` in the terminal, the message box of its notebook panel). `agent_id` is the parent's id.

    The child reads it at its next model request (it is queued while a round runs).
    """

    subagent_id: str
    content: str
    sender: Literal["parent", "user"]
    """`parent`: its parent's model sent it; `user`: the person did."""


@dataclass(frozen=True, kw_only=True)
class SubagentReport(AgentEvent, FormerlyText):
    """A running child told its parent something before it finished (`task_report`). `agent_id` is the child's id.

    The parent's model reads it at its next model request, as it reads the end of a background child.
    """

    parent_id: str
    content: str
