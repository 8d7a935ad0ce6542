"""The base of every event, where a tool call came from, and the callback events are emitted through."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["AgentEvent", "CallSource", "Emit", "FormerlySubagentType", "FormerlyText"]


@dataclass(frozen=True, kw_only=True)
class AgentEvent:
    """Base of every event."""

    agent_id: str
    """Id of the agent that produced the event (`agent-` plus hex)."""
    at: float = field(default_factory=time.time, compare=False, repr=False)
    """When the event happened: seconds since the epoch (`time.time()`). A replayed event has the time saved."""



class FormerlyText:
    """An event whose text was called `text` before it was `content` (as on every other event):
    `event.text` still reads it, with a `DeprecationWarning`."""

    content: str

    @property
    def text(self) -> str:
        """Deprecated: use `content`."""
        message = f"freeact-sub: {type(self).__name__}.text is deprecated, use .content"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return self.content


class FormerlySubagentType:
    """An event whose `agent_type` was called `subagent_type` in the last release: `event.subagent_type` still
    reads it, with a `DeprecationWarning`."""

    agent_type: str

    @property
    def subagent_type(self) -> str:
        """Deprecated: use `agent_type`."""
        message = f"freeact-sub: {type(self).__name__}.subagent_type is deprecated, use .agent_type"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return self.agent_type


CallSource = Literal["model", "code"]
"""Who made a tool call: `"model"`, or `"code"` for an MCP tool that a cell's code calls."""

Emit = Callable[[AgentEvent], None]
"""The callback an agent's parts emit their events through (into the agent's stream)."""
