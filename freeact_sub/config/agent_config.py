"""`AgentConfig`: what an agent runs with — the schema, every field with its docstring.

Loading it from files, the environment and flags is `loading.py` (`AgentConfig.load` is the way in;
precedence, lowest first: defaults < config file (JSON or TOML) < environment (`FREEACT_SUB_*`) <
explicit overrides, the CLI's flags);
the model a config names is chosen in `models/providers.py`; the built-in prompt is `system_prompt.py`.
Every problem is a `ConfigError` that names the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ConfigError
from ..models import providers
from ..models.options import ModelOption, option_list
from ..policy.hooks import HookTable
from ..sandbox.profiles import SandboxSetting
from .kernel_gateway import KernelGatewayConfig
from .loading import (
    ENV_PREFIX,
    auto_approve_from_env,
    describe,
    environment_values,
    layered_values,
    load_mcp_config,
)
from .mcp_servers import (
    HttpServerConfig,
    McpServerConfig,
    McpServers,
    StdioServerConfig,
    servers_by_shape,
    with_location,
)
from .system_prompt import DEFAULT_SYSTEM_PROMPT, default_system_prompt

if TYPE_CHECKING:
    from pydantic_ai.models import Model

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "ENV_PREFIX",
    "AgentConfig",
    "ConfigError",
    "HttpServerConfig",
    "KernelGatewayConfig",
    "McpServerConfig",
    "StdioServerConfig",
    "auto_approve_from_env",
    "default_system_prompt",
    "load_mcp_config",
    "servers_by_shape",
    "values_from_environment",
]


class AgentConfig(BaseModel):
    """What an agent runs with. Subagents inherit their parent's config."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, validate_assignment=True)

    model: Any = "openai:gpt-4.1"
    """A pydantic-ai model string (`"openai:gpt-4.1"`, `"anthropic:claude-sonnet-4-5"`, …) or a `Model` instance."""
    model_settings: dict[str, Any] | None = None
    """pydantic-ai `ModelSettings` (temperature, max_tokens, …)."""
    base_url: str | None = None
    """Where the model's provider is reached instead of its default URL.

    With a bare model name (`"llama3.2"`) or `openai:…` it is an OpenAI-compatible server (Ollama,
    vLLM, llama.cpp); `anthropic:…` and `google:…` (or `google-gla:…`) point those providers there.
    Other prefixes are a `ConfigError`.
    """
    api_key_env: str | None = None
    """Name of the environment variable that holds the API key for `base_url` (whichever provider)."""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    """The system prompt. The built-in one teaches the model to act through code and names only the tools the
    agent has; a prompt of your own is sent as you wrote it. An agent type's `prompt` is added after it."""
    mcp_servers: McpServers = Field(default_factory=dict)
    """MCP servers by name, in the `mcpServers` shape: `{command, args, env, cwd}` or `{url, headers}`."""
    kernel_env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the kernel. A kernel gets only `PATH`, `HOME`, the locale and these: it
    never inherits the host's environment, so the host's provider API keys stay out of it."""
    working_dir: Path = Field(default_factory=Path.cwd)
    """The kernel's working directory."""
    execution_timeout: float = Field(default=300.0, gt=0)
    """Seconds a cell may run before it is interrupted and reported as timed out."""
    max_subagents: int = Field(default=5, ge=1)
    """How many subagents may run at once."""
    enable_subagents: bool = True
    """Offer the `task` tool (and `task_output`, `task_stop`, `task_list`, `task_send`)."""
    max_cost: float | None = Field(default=None, gt=0)
    """A budget in USD for the whole tree (the main agent and every subagent): once their model requests
    have cost this much, each agent stops before its next request. The models' prices must be known."""
    max_children: int | None = Field(default=None, ge=1)
    """How many subagents one agent may start over its life (each agent counts its own; a resumed child is not
    a new one); None: no limit. An agent type's `max_children` wins for agents of that type."""
    subagent_models: Annotated[list[ModelOption], BeforeValidator(option_list)] = Field(default_factory=list)
    """Models a `task` call may pick for its subagent (`model`), for every agent type without a `models` list of
    its own: model strings, or tables `{model, base_url, api_key_env, model_settings}` with their own connection.
    Empty: a call cannot pick one (the type's model, else the parent's, is used). In the environment, a
    comma-separated list (`FREEACT_SUB_SUBAGENT_MODELS=anthropic:claude-haiku-4-5,openai:gpt-4.1-mini`) or JSON."""
    max_depth: int = Field(default=1, ge=1)
    """How deep agents may nest: 1 lets only the main agent start subagents, 2 lets its children start
    their own, and so on. `max_subagents` bounds the children of the whole tree at once, at any depth."""
    kernel_pool_size: int = Field(default=2, ge=0)
    """Pre-started, never-used kernels kept ready for subagents (0 turns the pool off)."""
    mcp_pool_size: int = Field(default=1, ge=0)
    """Pre-opened, never-used connections kept ready per MCP server for subagents (0 turns the pool off).

    Each one is an idle server process (over HTTP, an open session) until a subagent takes it.
    """
    prestart_pools: bool = False
    """Start the kernel zygote and fill both pools as soon as the main agent has started. Off (the default), they
    start when the first subagent is near (its `task` call is announced, or it registers), so a run that starts
    no subagent starts no spare kernel and no spare MCP server; the interactive terminal turns it on behind its
    prompt, where a person's typing hides the cost."""
    max_turns: int | None = Field(default=None, ge=1)
    """Default limit on model rounds per `stream()` call (None: unlimited)."""
    model_retries: int = Field(default=5, ge=0)
    """How many times a model request that failed before any of its tool calls ran is sent again: a rate limit
    (429), an overload (529), a server error (5xx, 408, 409), a dropped, silent or malformed stream. 0: never.
    An agent type's `model_retries` wins for agents of that type (a cheap model may be retried more)."""
    model_retry_backoff: float = Field(default=0.5, ge=0)
    """Seconds to wait before the first retry when the provider says nothing (`Retry-After`); doubled for each
    further retry up to 30 s, with jitter. The provider's `Retry-After` wins when it sends one."""
    stream_idle_timeout: float | None = Field(default=300.0, gt=0)
    """Seconds a model's stream may stay silent (before its first chunk or between two) before it is dropped and
    the request retried; None: wait for ever. An agent type's `stream_idle_timeout` wins for its agents."""
    max_model_requests: int | None = Field(default=8, ge=1)
    """How many model requests the whole tree (the main agent and every subagent) has in flight at once; a
    request beyond it waits for a slot. None (`"none"` in the environment or on the command line): no bound."""
    auto_approve: bool = False
    """Approve every action of every agent (still emitted as decided `ApprovalRequest`s)."""
    telemetry: bool = False
    """Export OpenTelemetry traces and metrics of the tree (one trace per run; needs `freeact-sub[telemetry]`).
    Also on when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; off when `OTEL_SDK_DISABLED=true`. A tracer provider the
    program set already (Logfire, its own) is used as it is."""
    telemetry_content: bool = False
    """Put prompts, code, outputs and model messages on the spans (the GenAI conventions' opt-in); off: only
    names, ids, times, tokens and cost."""
    context_window: int | None = Field(default=None, gt=0)
    """The model's context window in tokens; None: from pydantic-ai's model profile (the provider's table, else
    `genai-prices`). Set it for a model neither knows (a local server, a proxy); unknown: no compaction before a
    request, only when the provider refuses one as too long."""
    compact_at: float | None = Field(default=0.85, gt=0, le=1)
    """Compact the history first when the next request would fill this share of the context window; None: never
    before a request (a provider's "context length exceeded" still compacts once and retries)."""
    compact_keep_rounds: int = Field(default=3, ge=0)
    """The latest model rounds a compaction keeps verbatim (fewer if they would fill more than a quarter of the
    window); the older ones become the summary."""
    max_output_chars: int = Field(default=20_000, ge=200)
    """A cell's output longer than this is shortened (head and tail kept) before it reaches the model."""
    images_dir: Path | None = None
    """Where kernel images are saved; default `<working_dir>/.freeact-sub/images`."""
    max_images_to_model: int = Field(default=3, ge=0)
    """How many of one cell's images go back to the model as images (if it accepts images); 0: paths only."""
    max_image_bytes: int = Field(default=2_000_000, ge=1)
    """A larger image is not sent to the model (its saved path still is)."""
    mcp_tools: Literal["calls", "code", "both"] = "both"
    """How MCP tools are offered: as tool calls (`"calls"`), as Python functions in the kernel
    (`"code"`: `from mcptools.<server> import <tool>`), or both."""
    save_sessions: bool = True
    """Save every agent's conversation as it happens under `<working_dir>/.freeact-sub/sessions/` (resumable)."""
    checkpoints: bool = True
    """Checkpoint the working folder before each turn of a main agent, so `Agent.rewind(turn)` (`/rewind`) can
    restore it; kept in the session (or, unsaved, in a private folder removed at the end)."""
    checkpoint_limit: int = 1 << 30
    """The most bytes a folder may hold for checkpoints (the first one keeps a copy of every file): a larger
    folder gets no checkpoints, and `rewind` says so, naming this limit."""
    isolation_copy: bool = False
    """Give each child with `isolation: copy-on-write` a private copy of the working folder even where this machine
    could mount a copy-on-write view (a copy is what it gets anyway where the sandbox is off, or no overlay can be
    mounted in a user namespace)."""
    isolation_copy_limit: int = 1 << 30
    """The most bytes a working folder may hold for a child's private copy (`isolation_copy`): a child asking
    for isolation over a larger folder is not started, and the reason names this limit."""
    kernel_gateway: KernelGatewayConfig | None = None
    """Run every kernel of the agent tree on this Jupyter Kernel / Enterprise Gateway (a URL is enough); None: local.

    MCP tools are then offered as tool calls only: code tools need the kernel on this machine.
    """

    hooks: HookTable = Field(default_factory=dict)
    """Hooks by event name (`PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `SubagentStart`, `SubagentStop`,
    `Stop`, `PreCompact`): callables, `HookSpec`s, or tables `{"matcher": "execute_*", "agents": [...],
    "command": "..."}`."""
    sandbox: SandboxSetting = None
    """What the kernels of the tree may read, write and reach, enforced by the operating system.

    A built-in profile by name (`"workspace"`, `"offline"`, `"read-only"`, `"packages"`, `"off"`), or a
    table `{"read_deny": [...], "write": [...], "network": false}`, where `network` may also list hosts
    (`["packages", "*.github.com"]`) and `memory`, `processes` and `cell_time` set limits. None: `workspace`
    where the platform can enforce it, else `off` with a warning. An agent type's own `sandbox` can only
    narrow it.
    """

    agent: str | None = None
    """Run the main agent as the named agent type (its prompt, model, tools, rules; `--agent`); None: `general`."""
    agents: dict[str, Any] = Field(default_factory=dict)
    """Agent types by name: `AgentType`s or plain dicts of their fields (the config file's `agents` table).

    They join, and by name replace, the built-in `general` and the Markdown files in
    `~/.config/freeact-sub/agents/` and `<working_dir>/.freeact-sub/agents/`.
    """
    approvals: dict[str, Literal["allow", "ask", "deny"]] = Field(default_factory=dict)
    """Approval rules for every agent by tool pattern (`{"calc_*": "allow", "reset_kernel": "deny"}`).

    They are one layer beside each agent type's own rules (and its ancestors' types'): within a layer the most
    specific pattern decides, across layers the strictest rule wins, so a type's `allow` never lifts a `deny` or
    an `ask` here. No matching rule means `ask`."""
    tools: list[str] | None = None
    """Tools offered to the model: names or glob patterns; None: all of them.

    (`execute_ipython_cell`, `reset_kernel`, `task`, `<server>_<tool>`.)"""
    disallowed_tools: list[str] = Field(default_factory=list)
    """Names or glob patterns of tools not offered. Without `execute_ipython_cell` the agent gets no kernel."""

    @field_validator("max_model_requests", "stream_idle_timeout", "compact_at", "context_window", mode="before")
    @classmethod
    def _none_in_words(cls, value: Any) -> Any:
        return None if isinstance(value, str) and value.strip().lower() in ("none", "unbounded", "off") else value

    @field_validator("kernel_gateway", mode="before")
    @classmethod
    def _gateway_from_url(cls, value: Any) -> Any:
        return {"url": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _code_tools_need_local_kernels(self) -> AgentConfig:
        if self.kernel_gateway is not None and self.mcp_tools == "code":
            raise ValueError(
                "mcp_tools: 'code' needs kernels on this machine, but kernel_gateway is set (use 'calls' or 'both')"
            )
        return self

    @model_validator(mode="after")
    def _one_kernel_username(self) -> AgentConfig:
        gateway, in_env = self.kernel_gateway, self.kernel_env.get("KERNEL_USERNAME")
        if gateway is not None and gateway.username is not None and in_env is not None and in_env != gateway.username:
            raise ValueError(
                f"kernel_gateway.username ({gateway.username!r}) and kernel_env.KERNEL_USERNAME ({in_env!r}) "
                "name different users: set one of them"
            )
        return self

    @field_validator("agents", mode="before")
    @classmethod
    def _agent_definitions(cls, value: Any) -> Any:
        from .definitions import AgentType, definition_fields

        if not isinstance(value, Mapping):
            return value
        parsed: dict[str, Any] = {}
        for name, spec in value.items():
            if isinstance(spec, AgentType) or not isinstance(spec, Mapping):
                parsed[name] = spec if isinstance(spec, AgentType) else AgentType.model_validate(spec)
                continue
            try:
                parsed[name] = AgentType.model_validate(definition_fields(spec))
            except ValidationError as exc:
                raise with_location(exc, name) from None
        return parsed

    @property
    def resolved_images_dir(self) -> Path:
        """Where kernel images are saved: `images_dir`, else `<working_dir>/.freeact-sub/images`."""
        return self.images_dir or (self.working_dir / ".freeact-sub" / "images")

    def make_working_dir(self) -> None:
        """Create `working_dir` if it is missing; `ConfigError` naming the field if it cannot be a folder.

        Done once, before the kernel, the MCP servers and the session store start there together (each
        would otherwise fail in its own words, or a server could start before the kernel made the folder).
        """
        try:
            self.working_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"working_dir: {self.working_dir} cannot be the working folder: {exc.strerror}") from None

    def make_state_dir(self) -> None:
        """Create `<working_dir>/.freeact-sub` when something of this config keeps files there; a `ConfigError`
        naming the folder and what needs it if it cannot be made or written (a read-only working folder)."""
        needs = [what for what, needed in (
            ("the saved sessions (save_sessions)", self.save_sessions),
            ("the images cells make (images_dir)", self.images_dir is None),
            ("the MCP tools' Python modules (mcp_tools)", self.mcp_tools != "calls" and bool(self.mcp_servers)),
        ) if needed]
        if not needs:
            return
        folder = self.working_dir / ".freeact-sub"
        try:
            if folder.exists() and not folder.is_dir():
                raise NotADirectoryError(0, "it is not a folder")
            folder.mkdir(exist_ok=True)
            writable = os.access(folder, os.W_OK | os.X_OK)
            problem = "" if writable else "it is not writable"
        except OSError as exc:
            problem = exc.strerror or str(exc)
        if problem:
            raise ConfigError(
                f"working_dir: {folder} cannot be made or written ({problem}); it holds {', '.join(needs)}. "
                "Choose a writable --working-dir, or turn those off (save_sessions = false, images_dir elsewhere, "
                "mcp_tools = 'calls')"
            )

    @classmethod
    def load(
        cls,
        config_file: str | Path | None = None,
        *,
        mcp_config: str | Path | None = None,
        environ: Mapping[str, str] | None = None,
        gateway_username: str | None = None,
        **overrides: Any,
    ) -> AgentConfig:
        """Build a config from a file, the environment and overrides (highest precedence).

        `config_file` is JSON or TOML with the fields of `AgentConfig` (an `mcpServers` key is
        accepted too). `mcp_config` is a JSON file in the `mcpServers` shape. Overrides whose
        value is None are ignored, so CLI flags can be passed through as they are.
        `gateway_username` (the CLI's `--gateway-username`; `FREEACT_SUB_GATEWAY_USERNAME` below
        it) sets `kernel_gateway.username`, keeping the gateway's other settings.
        """
        values = layered_values(config_file, mcp_config=mcp_config, environ=environ,
                                gateway_username=gateway_username, overrides=overrides, fields=cls.model_fields)
        return cls.validated(values, source=str(config_file) if config_file else "configuration")

    @classmethod
    def validated(cls, values: Mapping[str, Any], *, source: str = "configuration") -> AgentConfig:
        """Validate `values`, turning pydantic's errors into one `ConfigError` that names each field."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise ConfigError(describe(exc, source)) from None

    def resolve_model(self) -> Model:
        """The pydantic-ai `Model` this config names; a `ConfigError` says what is missing or unknown."""
        return providers.resolve_model(self.model, base_url=self.base_url, api_key_env=self.api_key_env)

    def check_model(self) -> None:
        """Raise the `ConfigError` `resolve_model` would, without importing a provider's SDK for a model at
        `base_url` (see `models.providers.check_model`)."""
        providers.check_model(self.model, base_url=self.base_url, api_key_env=self.api_key_env)


def values_from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """`FREEACT_SUB_<FIELD>` for every field of `AgentConfig`. For a field that is not plain text, a value starting
    with `[` or `{` is read as JSON (`FREEACT_SUB_TOOLS='["execute_*"]'`); anything else is text the field converts."""
    return environment_values(environ, AgentConfig.model_fields)
