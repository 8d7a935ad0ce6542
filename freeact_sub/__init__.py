"""freeact-sub: a code-action agent that acts in a managed IPython kernel.

The public API, and only it: `Agent` and `AgentConfig` (with the agent types, hooks, models and
MCP servers a config names), the events `Agent.stream()` yields, the shared `ApprovalPolicy`,
`timeline()` (who did what when, from events or a saved session), project trust, and the errors.
The terminal and the notebook front ends build on these; their own helpers live in their packages.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and the API reference read; at run time each name is imported on first use
    from .agent.agent import Agent
    from .config.agent_config import (
        DEFAULT_SYSTEM_PROMPT,
        AgentConfig,
        KernelGatewayConfig,
        load_mcp_config,
    )
    from .config.builtin_types import BUILTIN_TYPES
    from .config.commands import Command, CommandFiles
    from .config.definitions import AgentType
    from .config.project_trust import ProjectPowers, forget_folder, trusted_folders
    from .errors import ConfigError, ConfigWarning, FreeactError, KernelError, McpServerError, ModelError, SessionError
    from .events import (
        AgentEvent,
        ApprovalRequest,
        CodeExecutionOutput,
        CodeExecutionOutputChunk,
        ContextCompacted,
        HookFailed,
        ModelRetry,
        ModelSlot,
        ModelUsage,
        Response,
        ResponseChunk,
        Rewound,
        RunCancelled,
        SubagentFinished,
        SubagentMessage,
        SubagentQueued,
        SubagentReport,
        SubagentStarted,
        Thoughts,
        ThoughtsChunk,
        ToolOutput,
        TurnStarted,
    )
    from .events.batches import Batch, BatchRow, BatchTracker, BatchUpdate
    from .models.options import ModelOption
    from .policy.approvals import ApprovalPolicy
    from .policy.hooks import HookSpec
    from .sandbox.import_guard import UntrustedModuleError, guard_imports, trust_module
    from .timelines import Timeline, TimelineBuilder, timeline
    from .tree.registry import SubagentInfo
    from .usage import TreeUsage, Usage
    from .workspaces.checkpoints import Checkpoint

_WHERE: dict[str, str] = {
    "Agent": ".agent.agent",
    "DEFAULT_SYSTEM_PROMPT": ".config.agent_config",
    "AgentConfig": ".config.agent_config",
    "KernelGatewayConfig": ".config.agent_config",
    "load_mcp_config": ".config.agent_config",
    "BUILTIN_TYPES": ".config.builtin_types",
    "Command": ".config.commands",
    "CommandFiles": ".config.commands",
    "AgentType": ".config.definitions",
    "ProjectPowers": ".config.project_trust",
    "forget_folder": ".config.project_trust",
    "trusted_folders": ".config.project_trust",
    "ConfigError": ".errors",
    "ConfigWarning": ".errors",
    "FreeactError": ".errors",
    "KernelError": ".errors",
    "McpServerError": ".errors",
    "ModelError": ".errors",
    "SessionError": ".errors",
    "AgentEvent": ".events",
    "Batch": ".events.batches",
    "BatchRow": ".events.batches",
    "BatchTracker": ".events.batches",
    "BatchUpdate": ".events.batches",
    "ApprovalRequest": ".events",
    "CodeExecutionOutput": ".events",
    "CodeExecutionOutputChunk": ".events",
    "ContextCompacted": ".events",
    "HookFailed": ".events",
    "ModelRetry": ".events",
    "ModelSlot": ".events",
    "ModelUsage": ".events",
    "Response": ".events",
    "ResponseChunk": ".events",
    "Rewound": ".events",
    "RunCancelled": ".events",
    "SubagentFinished": ".events",
    "SubagentMessage": ".events",
    "SubagentQueued": ".events",
    "SubagentReport": ".events",
    "SubagentStarted": ".events",
    "Thoughts": ".events",
    "ThoughtsChunk": ".events",
    "ToolOutput": ".events",
    "TurnStarted": ".events",
    "ModelOption": ".models.options",
    "ApprovalPolicy": ".policy.approvals",
    "HookSpec": ".policy.hooks",
    "UntrustedModuleError": ".sandbox.import_guard",
    "trust_module": ".sandbox.import_guard",
    "guard_imports": ".sandbox.import_guard",
    "Timeline": ".timelines",
    "TimelineBuilder": ".timelines",
    "timeline": ".timelines",
    "SubagentInfo": ".tree.registry",
    "TreeUsage": ".usage",
    "Usage": ".usage",
    "Checkpoint": ".workspaces.checkpoints",
}
"""The module each public name lives in. Importing `freeact_sub` imports none of them: `freeact-sub --help`, the
terminal's prompt and an ACP client's `initialize` do not wait for pydantic-ai, jupyter-client and the rest."""

__all__ = [
    "BUILTIN_TYPES",
    "DEFAULT_SYSTEM_PROMPT",
    "Agent",
    "AgentConfig",
    "AgentEvent",
    "AgentType",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Batch",
    "BatchRow",
    "BatchTracker",
    "BatchUpdate",
    "Checkpoint",
    "CodeExecutionOutput",
    "CodeExecutionOutputChunk",
    "Command",
    "CommandFiles",
    "ConfigError",
    "ConfigWarning",
    "ContextCompacted",
    "FreeactError",
    "HookFailed",
    "HookSpec",
    "KernelError",
    "KernelGatewayConfig",
    "McpServerError",
    "ModelError",
    "ModelOption",
    "ModelRetry",
    "ModelSlot",
    "ModelUsage",
    "ProjectPowers",
    "Response",
    "ResponseChunk",
    "Rewound",
    "RunCancelled",
    "SessionError",
    "SubagentFinished",
    "SubagentInfo",
    "SubagentMessage",
    "SubagentQueued",
    "SubagentReport",
    "SubagentStarted",
    "Thoughts",
    "ThoughtsChunk",
    "Timeline",
    "TimelineBuilder",
    "ToolOutput",
    "TreeUsage",
    "TurnStarted",
    "UntrustedModuleError",
    "Usage",
    "__version__",
    "forget_folder",
    "guard_imports",
    "load_mcp_config",
    "timeline",
    "trust_module",
    "trusted_folders",
]


def __getattr__(name: str) -> Any:
    """A public name, imported on first use (and kept); `__version__`; and the deprecated names, which still
    import with a `DeprecationWarning`: `AgentDefinition` (use `AgentType`), `HookError` (use `HookFailed`),
    `TurnCancelled` (use `RunCancelled`)."""
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name], __name__), name)
        globals()[name] = value
        return value
    if name == "__version__":
        return _version()
    if name == "AgentDefinition":
        message = "freeact-sub: AgentDefinition is deprecated, use AgentType (the same class)"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return __getattr__("AgentType")
    from .events import deprecated_name

    return deprecated_name(__name__, name)


def __dir__() -> list[str]:
    return sorted(__all__)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("freeact-sub")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without installing
        return "0.0.0"
