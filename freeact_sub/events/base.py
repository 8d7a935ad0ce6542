"""The base of every event, where a tool call came from, and the callback events are emitted through."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["AgentEvent", "CallSource", "Emit"]


@dataclass(frozen=True, kw_only=True)
class AgentEvent:
    """Base of every event."""

    agent_id: str
    """Id of the agent that produced the event (`agent-` plus hex)."""
    at: float = field(default_factory=time.time, compare=False, repr=False)
    """When the event happened: seconds since the epoch (`time.time()`). A replayed event has the time saved."""



CallSource = Literal["model", "code"]
"""Who made a tool call: `"model"`, or `"code"` for an MCP tool that a cell's code calls."""

Emit = Callable[[AgentEvent], None]
"""The callback an agent's parts emit their events through (into the agent's stream)."""
