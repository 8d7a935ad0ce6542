"""freeact-sub: a code-action agent that acts in a managed IPython kernel.

The public API, and only it: `Agent` and `AgentConfig` (with the agent types, hooks, models and
MCP servers a config names), the events `Agent.stream()` yields, the shared `ApprovalPolicy`,
`timeline()` (who did what when, from events or a saved session), project trust, and the errors.
The terminal and the notebook front ends build on these; their own helpers live in their packages.
"""

from importlib.metadata import PackageNotFoundError, version

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
    HookFailed,
    ModelRetry,
    ModelSlot,
    ModelUsage,
    Response,
    ResponseChunk,
    SubagentFinished,
    SubagentMessage,
    SubagentQueued,
    SubagentReport,
    SubagentStarted,
    Thoughts,
    ThoughtsChunk,
    ToolOutput,
    RunCancelled,
    TurnStarted,
    deprecated_name,
)
from .models.options import ModelOption
from .policy.approvals import ApprovalPolicy
from .policy.hooks import HookSpec
from .timelines import Timeline, TimelineBuilder, timeline
from .tree.registry import SubagentInfo
from .usage import TreeUsage, Usage

try:
    __version__ = version("freeact-sub")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without installing
    __version__ = "0.0.0"

__all__ = [
    "BUILTIN_TYPES",
    "DEFAULT_SYSTEM_PROMPT",
    "Agent",
    "AgentConfig",
    "AgentType",
    "AgentEvent",
    "ApprovalPolicy",
    "ApprovalRequest",
    "CodeExecutionOutput",
    "CodeExecutionOutputChunk",
    "Command",
    "CommandFiles",
    "ConfigError",
    "ConfigWarning",
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
    "RunCancelled",
    "TurnStarted",
    "Usage",
    "__version__",
    "forget_folder",
    "load_mcp_config",
    "timeline",
    "trusted_folders",
]


def __getattr__(name: str) -> object:
    """Deprecated names (`HookError`: use `HookFailed`) still import, with a `DeprecationWarning`."""
    return deprecated_name(__name__, name)
