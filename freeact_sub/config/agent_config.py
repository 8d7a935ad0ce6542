"""`AgentConfig`: what an agent runs with, and loading it from a file, the environment and flags.

Precedence, lowest first: defaults < config file (JSON or TOML) < environment (`FREEACT_SUB_*`)
< explicit overrides (the CLI's flags). Every problem is a `ConfigError` that names the field.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ConfigError
from ..models.options import ModelOption, option_list
from ..policy.hooks import HookTable
from ..sandbox.profiles import SandboxSetting
from .mcp_servers import HttpServerConfig, McpServerConfig, StdioServerConfig, servers_by_shape, with_location

if TYPE_CHECKING:
    from pydantic_ai.models import Model

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "AgentConfig",
    "ConfigError",
    "HttpServerConfig",
    "KernelGatewayConfig",
    "McpServerConfig",
    "StdioServerConfig",
    "load_mcp_config",
    "servers_by_shape",
]

_CODE_ACTION = """\
You are a capable assistant that acts by writing Python code.

You have an IPython kernel of your own. To act, call the `execute_ipython_cell` tool with
Python code; you get back everything the cell printed, the value of its last expression and,
if it raised, the traceback. The kernel keeps its state between calls, so build on earlier
cells instead of repeating them. Use IPython features where they help (`%pip install`,
`!shell commands`). Images and plots you create are saved to files and their paths are shown.

Work in small steps: run a little code, look at the result, then decide the next step. When a
cell fails, read the traceback and fix the cause. Prefer computing an answer over guessing it.
`reset_kernel` gives you a clean kernel when its state is broken.
"""

_TOOLS_ONLY = """\
You are a capable assistant that acts through the tools you are given; you cannot run code.

Work in small steps: call a tool, read its result, then decide the next step. When a call
fails, read the error and fix the cause. Prefer what the tools tell you over guessing.
"""

_SUBAGENTS = """\
If you have a `task` tool, it hands an isolated job to a subagent with a fresh kernel; start
independent jobs as parallel `task` calls in one response.
"""

_APPROVALS = """\
Every tool call may need the user's approval. A call rejected without a reason ends your turn;
one rejected with a reason did not run: adjust to the reason and go on. When the job is
done, answer in plain text (Markdown is fine), concisely, with the results the user asked for.
"""


def default_system_prompt(*, runs_code: bool = True, starts_subagents: bool = True) -> str:
    """The built-in system prompt for an agent with these tools: it names no tool the agent lacks."""
    sections = [_CODE_ACTION if runs_code else _TOOLS_ONLY]
    if starts_subagents:
        sections.append(_SUBAGENTS)
    sections.append(_APPROVALS)
    return "\n".join(sections)


DEFAULT_SYSTEM_PROMPT = default_system_prompt()
"""The built-in system prompt of an agent that runs code and may start subagents.

An agent whose `system_prompt` is this one sends `default_system_prompt()` for the tools it
really has (a type without `execute_ipython_cell` is not told to run code)."""

ENV_PREFIX = "FREEACT_SUB_"


class KernelGatewayConfig(BaseModel):
    """Kernels on a Jupyter Kernel Gateway or Enterprise Gateway instead of this machine.

    Secrets are never written into the config: the token and extra headers are read from the
    environment variables named here (the same ones Jupyter's own gateway client reads).

    Every kernel start names its user in the kernel's environment as `KERNEL_USERNAME`, as
    Jupyter Server's gateway client does: Enterprise Gateway starts kernels only for users it
    authorizes (and never for `root` unless configured so); Kernel Gateway passes it on to the kernel.
    """

    model_config = ConfigDict(extra="forbid")

    url: str
    """Base URL of the gateway, e.g. `http://127.0.0.1:8888` or `https://gateway.example.org/base`."""
    kernel_name: str = "python3"
    """The kernel spec to start on the gateway."""
    token_env: str = "JUPYTER_GATEWAY_AUTH_TOKEN"
    """Environment variable holding the gateway's token (sent as `Authorization: token …`); unset: no token."""
    headers_env: str = "JUPYTER_GATEWAY_HEADERS"
    """Environment variable holding extra HTTP headers as a JSON object (for a proxy's own auth); unset: none."""
    start_timeout: float = Field(default=120.0, gt=0)
    """Seconds a kernel may take to start (Enterprise Gateway may first have to pull an image)."""
    request_timeout: float = Field(default=30.0, gt=0)
    """Seconds any other gateway request may take."""
    validate_cert: bool = True
    """Check the gateway's TLS certificate (`https`/`wss`)."""
    username: str | None = None
    """The user kernels are started for (`KERNEL_USERNAME`); None: a `KERNEL_USERNAME` in `kernel_env`, else
    the user running this program. Enterprise Gateway refuses users it does not authorize."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("expected an http:// or https:// URL of the gateway")
        return value.rstrip("/")

    @field_validator("username")
    @classmethod
    def _plain_username(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or value != value.strip() or not value.isprintable()):
            raise ValueError("expected a user name without surrounding spaces or control characters")
        return value

    def kernel_username(self, kernel_env: Mapping[str, str] | None = None) -> str:
        """The `KERNEL_USERNAME` of every kernel start: `username`, else `kernel_env`'s, else the host user's name."""
        if self.username is not None:
            return self.username
        given = (kernel_env or {}).get("KERNEL_USERNAME", "").strip()
        if given:
            return given
        try:
            return getpass.getuser()
        except (KeyError, OSError) as exc:  # no login name in the environment and no passwd entry for our uid
            raise ConfigError(
                f"kernel_gateway.username: not set, and the name of the user running this program is unknown ({exc})"
            ) from None

    def headers(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The HTTP headers of every request: the token and extra headers from the environment."""
        environ = os.environ if environ is None else environ
        headers: dict[str, str] = {}
        raw = environ.get(self.headers_env, "").strip()
        if raw:
            try:
                extra = json.loads(raw)
            except json.JSONDecodeError as exc:
                message = f"kernel_gateway.headers_env: {self.headers_env} is not a JSON object: {exc}"
                raise ConfigError(message) from None
            if not isinstance(extra, dict) or not all(isinstance(v, str) for v in extra.values()):
                raise ConfigError(f"kernel_gateway.headers_env: {self.headers_env} must be a JSON object of strings")
            headers.update(extra)
        token = environ.get(self.token_env, "").strip()
        if token:
            headers["Authorization"] = f"token {token}"
        return headers


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
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    """MCP servers by name, in the `mcpServers` shape: `{command, args, env, cwd}` or `{url, headers}`."""
    kernel_env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the kernel (it never inherits the host's API keys)."""
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
    subagent_models: list[ModelOption] = Field(default_factory=list)
    """Models a `task` call may pick for its subagent (`model`), for every agent type without a `models` list of
    its own: model strings, or tables `{model, base_url, api_key_env, model_settings}` with their own connection.
    Empty: a call cannot pick one (the type's model, else the parent's, is used)."""
    max_depth: int = Field(default=1, ge=1)
    """How deep agents may nest: 1 lets only the main agent start subagents, 2 lets its children start
    their own, and so on. `max_subagents` bounds the children of the whole tree at once, at any depth."""
    kernel_pool_size: int = Field(default=2, ge=0)
    """Pre-started, never-used kernels kept ready for subagents (0 turns the pool off)."""
    mcp_pool_size: int = Field(default=1, ge=0)
    """Pre-opened, never-used connections kept ready per MCP server for subagents (0 turns the pool off).

    Each one is an idle server process (over HTTP, an open session) until a subagent takes it.
    """
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
    kernel_gateway: KernelGatewayConfig | None = None
    """Run every kernel of the agent tree on this Jupyter Kernel / Enterprise Gateway (a URL is enough); None: local.

    MCP tools are then offered as tool calls only: code tools need the kernel on this machine.
    """

    hooks: HookTable = Field(default_factory=dict)
    """Hooks by event name (`PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `SubagentStart`, `SubagentStop`,
    `Stop`): callables, `HookSpec`s, or tables `{"matcher": "execute_*", "agents": [...], "command": "..."}`."""
    sandbox: SandboxSetting = None
    """What the kernels of the tree may read, write and reach, enforced by the operating system.

    A built-in profile by name (`"workspace"`, `"offline"`, `"read-only"`, `"off"`), or a table
    `{"read_deny": [...], "write": [...], "network": false}`. None: `workspace` where the platform
    can enforce it, else `off` with a warning. An agent type's own `sandbox` can only narrow it.
    """

    agent: str | None = None
    """Run this agent as the named agent type (its prompt, model, tools, rules); None: `general`."""
    agents: dict[str, Any] = Field(default_factory=dict)
    """Agent types by name: `AgentDefinition`s or plain dicts of their fields (the config file's `agents` table).

    They join, and by name replace, the built-in `general` and the Markdown files in
    `~/.config/freeact-sub/agents/` and `<working_dir>/.freeact-sub/agents/`.
    """
    approvals: dict[str, Literal["allow", "ask", "deny"]] = Field(default_factory=dict)
    """Approval rules for every agent by tool pattern (`{"calc_*": "allow", "reset_kernel": "deny"}`).

    An agent type's own rules take precedence over these."""
    tools: list[str] | None = None
    """Tools offered to the model: names or glob patterns; None: all of them.

    (`execute_ipython_cell`, `reset_kernel`, `task`, `<server>_<tool>`.)"""
    disallowed_tools: list[str] = Field(default_factory=list)
    """Names or glob patterns of tools not offered. Without `execute_ipython_cell` the agent gets no kernel."""

    @field_validator("max_model_requests", "stream_idle_timeout", mode="before")
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

    @field_validator("subagent_models", mode="before")
    @classmethod
    def _model_list(cls, value: Any) -> Any:
        return option_list(value)

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _servers_by_shape(cls, value: Any) -> Any:
        return servers_by_shape(value)

    @field_validator("agents", mode="before")
    @classmethod
    def _agent_definitions(cls, value: Any) -> Any:
        from .definitions import AgentDefinition, definition_fields

        if not isinstance(value, Mapping):
            return value
        parsed: dict[str, Any] = {}
        for name, spec in value.items():
            if isinstance(spec, AgentDefinition) or not isinstance(spec, Mapping):
                parsed[name] = spec if isinstance(spec, AgentDefinition) else AgentDefinition.model_validate(spec)
                continue
            try:
                parsed[name] = AgentDefinition.model_validate(definition_fields(spec))
            except ValidationError as exc:
                raise with_location(exc, name) from None
        return parsed

    @property
    def resolved_images_dir(self) -> Path:
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
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        if config_file is not None:
            values.update(_read_config_file(Path(config_file)))
        if mcp_config is not None:
            values["mcp_servers"] = load_mcp_config(mcp_config)
        given = {k: v for k, v in overrides.items() if v is not None}
        if isinstance(values.get("agents"), Mapping) and isinstance(given.get("agents"), Mapping):
            given["agents"] = {**values["agents"], **given["agents"]}  # code's types replace the file's by name
        for layer in (values_from_environment(environ), given):
            gateway, earlier = layer.get("kernel_gateway"), values.get("kernel_gateway")
            if isinstance(gateway, str) and isinstance(earlier, Mapping):
                layer["kernel_gateway"] = {**earlier, "url": gateway}  # a URL alone keeps the file's other settings
            values.update(layer)
        if gateway_username is not None and values.get("kernel_gateway") is None:
            raise ConfigError("gateway_username (--gateway-username) names the user of a kernel gateway, but no "
                              "gateway is set (--kernel-gateway, kernel_gateway or $FREEACT_SUB_KERNEL_GATEWAY)")
        # the variable alone is ignored without a gateway: it may be exported for other uses of the program
        username = gateway_username
        if username is None:
            username = environ.get(ENV_PREFIX + "GATEWAY_USERNAME") or None
        if username is not None and values.get("kernel_gateway") is not None:
            values["kernel_gateway"] = _with_username(values["kernel_gateway"], username)
        return cls.validated(values, source=str(config_file) if config_file else "configuration")

    @classmethod
    def validated(cls, values: Mapping[str, Any], *, source: str = "configuration") -> AgentConfig:
        """Validate `values`, turning pydantic's errors into one `ConfigError` that names each field."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise ConfigError(_describe(exc, source)) from None

    def resolve_model(self) -> Model:
        """The pydantic-ai `Model` this config names; a `ConfigError` says what is missing or unknown."""
        from pydantic_ai.models import Model, infer_model

        if isinstance(self.model, Model):
            return self.model
        if not isinstance(self.model, str) or not self.model:
            raise ConfigError("model: expected a pydantic-ai model string such as 'openai:gpt-4.1'")
        if self.base_url:
            return _model_at(self.model, self.base_url, self._api_key())
        try:
            prefix, _, rest = self.model.partition(":")
            return infer_model(f"{_PREFIX_ALIASES[prefix]}{rest}" if rest and prefix in _PREFIX_ALIASES else self.model)
        except Exception as exc:  # pydantic-ai raises UserError for unknown names and missing keys
            missing = re.search(r"Set the `(\w+)` environment variable", str(exc))
            if missing:  # say it in a person's words, not the library's (`OpenAIProvider(api_key=...)`)
                raise ConfigError(
                    f"model {self.model!r} needs an API key: set the environment variable {missing.group(1)} "
                    "(or put it in a .env file), or name another variable with api_key_env (--api-key-env NAME)"
                ) from None
            raise ConfigError(f"model {self.model!r}: {exc}") from None

    def check_model(self) -> None:
        """Raise the `ConfigError` that `resolve_model` would, without building a model at `base_url`: that needs only
        its key's variable and a prefix that works there, and building it imports the provider's SDK (`anthropic`
        alone takes ~2 s), which a check at start need not pay for a type that may never run."""
        if isinstance(self.model, str) and self.model and self.base_url:
            self._api_key()
            _base_url_model(self.model)
            return
        self.resolve_model()

    def _api_key(self) -> str | None:
        """The key in the variable `api_key_env` names; None when no variable is named."""
        if not self.api_key_env:
            return None
        api_key = os.environ.get(self.api_key_env)
        if not api_key:
            raise ConfigError(f"api_key_env: the environment variable {self.api_key_env} is not set")
        return api_key


_PREFIX_ALIASES = {"google-gla": "google:"}
"""Older pydantic-ai prefixes, still accepted."""

BASE_URL_PREFIXES = ("openai", "openai-chat", "openai-responses", "anthropic", "google", "google-gla")
"""Model prefixes that work with `base_url`; a bare model name means an OpenAI-compatible server."""


def _model_at(model: str, base_url: str, api_key: str | None) -> Model:
    """The model `model` names, with its provider pointed at `base_url`.

    Without a key (`api_key_env`) the provider gets a placeholder: a server at a URL of your
    choosing (a local model, a proxy) must never receive a provider key from the host's
    environment by accident.
    """
    prefix, name = _base_url_model(model)
    key = api_key or "not-needed"
    if prefix in ("", "openai", "openai-chat"):
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        return OpenAIChatModel(name, provider=OpenAIProvider(base_url=base_url, api_key=key))
    if prefix == "openai-responses":
        from pydantic_ai.models.openai import OpenAIResponsesModel
        from pydantic_ai.providers.openai import OpenAIProvider

        return OpenAIResponsesModel(name, provider=OpenAIProvider(base_url=base_url, api_key=key))
    if prefix == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        return AnthropicModel(name, provider=AnthropicProvider(base_url=base_url, api_key=key))
    if prefix in ("google", "google-gla"):
        from pydantic_ai.models.google import GoogleModel
        from pydantic_ai.providers.google import GoogleProvider

        return GoogleModel(name, provider=GoogleProvider(base_url=base_url, api_key=key))
    raise AssertionError(prefix)  # pragma: no cover - `_base_url_model` lets no other prefix through


def _base_url_model(model: str) -> tuple[str, str]:
    """The prefix and the name of a model at a `base_url` (prefix "" for a bare name); a `ConfigError` for a prefix
    that does not work with `base_url`."""
    prefix, _, name = model.partition(":")
    if not name:
        return "", model
    if prefix in BASE_URL_PREFIXES:
        return prefix, name
    known = ", ".join(f"'{p}:'" for p in BASE_URL_PREFIXES)
    raise ConfigError(
        f"model {model!r}: the prefix {prefix!r} does not work with base_url. Use one of {known}, or a "
        f"model name without a prefix for an OpenAI-compatible server (a name with a colon, such as "
        f"Ollama's 'qwen2.5:7b', goes as 'openai:qwen2.5:7b')"
    )


def load_mcp_config(path: str | Path) -> dict[str, McpServerConfig]:
    """Read a JSON file in the `mcpServers` shape (`{"mcpServers": {name: {...}}}` or the inner mapping), or VS Code's
    `{"servers": {name: {"type": "stdio", ...}}}` (its `inputs` are not read)."""
    data = _read_config_file(Path(path))
    if "mcp_servers" in data:
        servers = data["mcp_servers"]
    elif isinstance(data.get("servers"), Mapping):  # VS Code's .vscode/mcp.json
        servers = data["servers"]
    elif data and all(isinstance(spec, Mapping) and ("command" in spec or "url" in spec) for spec in data.values()):
        servers = data
    else:
        raise ConfigError(f"{path}: expected `mcpServers` (or VS Code's `servers`): an object mapping server names to "
                          f"their settings; the file has {', '.join(map(repr, data)) or 'nothing'}")
    if not isinstance(servers, Mapping):
        raise ConfigError(f"{path}: mcpServers must be an object mapping server names to their settings")
    try:
        return AgentConfig.model_validate({"mcp_servers": servers}).mcp_servers
    except ValidationError as exc:
        raise ConfigError(_describe(exc, str(path))) from None


def _read_config_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise ConfigError(f"{path}: not valid {kind}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected an object at the top level")
    if "mcpServers" in data:
        data["mcp_servers"] = data.pop("mcpServers")
    return data


def _with_username(gateway: Any, username: str) -> Any:
    """`kernel_gateway` (a URL, a table or a `KernelGatewayConfig`) with its `username` set."""
    if isinstance(gateway, str):
        return {"url": gateway, "username": username}
    if isinstance(gateway, KernelGatewayConfig):
        return {**gateway.model_dump(exclude_unset=True), "username": username}
    if isinstance(gateway, Mapping):
        return {**gateway, "username": username}
    return gateway  # not a gateway setting at all: validation names the field


def values_from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """`FREEACT_SUB_<FIELD>` for every field of `AgentConfig`. For a field that is not plain text, a value starting
    with `[` or `{` is read as JSON (`FREEACT_SUB_TOOLS='["execute_*"]'`); anything else is text the field converts."""
    values: dict[str, Any] = {}
    for field in AgentConfig.model_fields:
        raw = environ.get(ENV_PREFIX + field.upper())
        if raw is None or raw == "":
            continue
        text = raw.strip()
        if text[:1] in ("[", "{") and AgentConfig.model_fields[field].annotation not in (str, str | None):
            try:
                values[field] = json.loads(text)
                continue
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{ENV_PREFIX}{field.upper()}: not valid JSON: {exc}") from None
        values[field] = raw
    return values


def auto_approve_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether `FREEACT_SUB_AUTO_APPROVE` asks to approve every action."""
    raw = (os.environ if environ is None else environ).get(ENV_PREFIX + "AUTO_APPROVE", "")
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _describe(exc: ValidationError, source: str) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        location = ".".join(str(part) for part in error["loc"]) or "(top level)"
        lines.append(f"{location}: {error['msg']}")
    fields = "\n  ".join(lines)
    return f"invalid {source}:\n  {fields}"

