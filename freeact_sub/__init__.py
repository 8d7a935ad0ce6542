"""freeact-sub: a code-action agent that acts in a managed IPython kernel.

The public API: `Agent` and `AgentConfig`, the events `Agent.stream()` yields, the shared
`ApprovalPolicy`, `timeline()` (who did what when, from events or a saved session), and the
errors. The terminal and the notebook front ends use only these.
"""

from importlib.metadata import PackageNotFoundError, version

from .agent.agent import Agent
from .agent.direct import split_type_prompt
from .config.agent_config import (
    DEFAULT_SYSTEM_PROMPT,
    AgentConfig,
    KernelGatewayConfig,
    auto_approve_from_env,
    load_mcp_config,
)
from .config.builtin_types import BUILTIN_TYPES
from .config.commands import Command, CommandFiles, load_commands, read_commands
from .config.definitions import AgentDefinition
from .config.project_trust import ProjectPowers, forget_folder, trusted_folders, trusted_folders_file
from .errors import ConfigError, ConfigWarning, FreeactError, KernelError, McpServerError, ModelError, SessionError
from .events import (
    AgentEvent,
    ApprovalRequest,
    CodeExecutionOutput,
    CodeExecutionOutputChunk,
    HookError,
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
    TurnCancelled,
    TurnStarted,
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
    "AgentDefinition",
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
    "HookError",
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
    "TurnCancelled",
    "TurnStarted",
    "Usage",
    "__version__",
    "auto_approve_from_env",
    "forget_folder",
    "load_commands",
    "load_mcp_config",
    "read_commands",
    "split_type_prompt",
    "timeline",
    "trusted_folders",
    "trusted_folders_file",
]
