"""Events emitted by `Agent.stream()`.

Every event derives from `AgentEvent` and carries the `agent_id` of the agent that produced it.
Events of a subagent flow through its parent's stream unchanged, still tagged with the
subagent's id, so one `async for` loop sees every agent at work.

Event family::

    AgentEvent
    ├── TurnStarted                  a model round begins (turn number, for "turns used")
    ├── ThoughtsChunk / Thoughts     the model's thinking, streamed / complete
    ├── ResponseChunk / Response     the model's text, streamed / complete
    ├── ModelUsage                   tokens (and cost, where known) of one model response
    ├── ModelRetry                   a model request failed before it acted and is sent again after a wait
    ├── ModelSlot                    a model request waits for a slot of `max_model_requests` / got one
    ├── ApprovalRequest              a tool call waits for a decision (or was decided by a policy);
    │                                `source="code"` for an MCP tool that a cell's code calls
    ├── CodeExecutionOutputChunk     output of a running cell, as it arrives
    ├── CodeExecutionOutput          the complete output of a cell (text and saved images)
    ├── ToolOutput                   the result of an MCP tool, of `reset_kernel` or of `task`
    ├── SubagentQueued               a `task` call's child waits for a slot (`max_subagents`)
    ├── SubagentStarted              a `task` call started a child agent
    ├── SubagentFinished             that child agent ended (done, failed, cancelled, turn limit)
    ├── SubagentMessage              a message to a running background child (its parent's model or the person)
    ├── SubagentReport               a running child tells its parent something before it finishes
    ├── RunCancelled                 the run (a `stream()` call) was cancelled; the history says how far it got
    ├── ContextCompacted             older rounds became a summary the model wrote (tokens before and after)
    ├── Rewound                      the folder and the conversation went back to a checkpoint (`Agent.rewind`)
    └── HookFailed                   a hook failed; the moment went on as if it did not exist

All events are frozen dataclasses; dispatch on them with `match`. They are defined by kind —
`turn` (lifecycle), `model_output`, `approvals`, `tool_results`, `subagents` — and all imported
from here. `Emit` is the callback type an agent's parts emit events through.

Deprecated names still work and warn: `HookError` (now `HookFailed`: an event, not an exception)
and `TurnCancelled` (now `RunCancelled`: a turn is one model round, a run is one `stream()` call).
"""

from __future__ import annotations

import warnings
from typing import Any

from .approvals import ApprovalRequest
from .base import AgentEvent, CallSource, Emit
from .model_output import ModelRetry, ModelSlot, ModelUsage, Response, ResponseChunk, Thoughts, ThoughtsChunk
from .subagents import (
    SubagentFinished,
    SubagentMessage,
    SubagentQueued,
    SubagentReport,
    SubagentStarted,
    SubagentStatus,
)
from .tool_results import CodeExecutionOutput, CodeExecutionOutputChunk, ToolOutput
from .turn import ContextCompacted, HookFailed, Rewound, RunCancelled, TurnStarted

__all__ = [
    "AgentEvent",
    "ApprovalRequest",
    "CallSource",
    "CodeExecutionOutput",
    "CodeExecutionOutputChunk",
    "ContextCompacted",
    "Emit",
    "HookFailed",
    "ModelRetry",
    "ModelSlot",
    "ModelUsage",
    "Response",
    "ResponseChunk",
    "Rewound",
    "RunCancelled",
    "SubagentFinished",
    "SubagentMessage",
    "SubagentQueued",
    "SubagentReport",
    "SubagentStarted",
    "SubagentStatus",
    "Thoughts",
    "ThoughtsChunk",
    "ToolOutput",
    "TurnStarted",
]

DEPRECATED_NAMES = {"HookError": "HookFailed", "TurnCancelled": "RunCancelled"}
"""Old names still importable from here and from `freeact_sub`, each with a `DeprecationWarning`."""


def deprecated_name(module: str, name: str) -> Any:
    """The event an old name stands for, with a `DeprecationWarning`; `AttributeError` for any other name."""
    if name not in DEPRECATED_NAMES:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new = DEPRECATED_NAMES[name]
    warnings.warn(f"freeact-sub: {name} is deprecated, use {new} (the same class)", DeprecationWarning, stacklevel=3)
    return globals()[new]


def __getattr__(name: str) -> Any:
    return deprecated_name(__name__, name)
