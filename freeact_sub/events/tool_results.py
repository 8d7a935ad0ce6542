"""What a tool call returned: a cell's output (streamed and complete) and the result of any other tool."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .base import AgentEvent, CallSource, FormerlyText

__all__ = ["CodeExecutionOutput", "CodeExecutionOutputChunk", "ToolOutput"]


@dataclass(frozen=True, kw_only=True)
class CodeExecutionOutputChunk(AgentEvent, FormerlyText):
    """Output of a running cell, as it arrives (stdout, stderr, results, tracebacks)."""

    content: str
    tool_call_id: str


@dataclass(frozen=True, kw_only=True)
class CodeExecutionOutput(AgentEvent, FormerlyText):
    """The complete output of one cell."""

    content: str
    """All text output, ANSI escapes removed; also what the model receives (possibly shortened)."""
    images: tuple[Path, ...] = ()
    """Files the cell's images (`image/png`) were saved to."""
    tool_call_id: str
    status: Literal["ok", "error", "timeout", "kernel_died"] = "ok"
    """How the cell ended: normally, with an exception, interrupted after the timeout, or the kernel died."""
    kernel_wait: float = 0.0
    """Seconds the cell waited for its kernel before it ran: a subagent's kernel boots beside its first model
    request, and a first cell that comes sooner waits for it (0 otherwise)."""


@dataclass(frozen=True, kw_only=True)
class ToolOutput(AgentEvent):
    """The result of a non-code tool call: an MCP tool, `reset_kernel`, or a subagent's final answer (`task`)."""

    content: str
    tool_name: str
    tool_call_id: str
    is_error: bool = False
    """True for a refused call (bad arguments, unknown tool), an MCP tool that reported an error, and a
    `task` whose child failed, stopped at its turn limit or had a call rejected."""
    source: CallSource = "model"
    """`"code"` for the result of an MCP tool called from a cell's code (it went back to the cell, not the model)."""
    cell_call_id: str | None = None
    """For a call from code: the `tool_call_id` of the cell that made it."""
