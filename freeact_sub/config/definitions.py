"""`AgentType`: what one agent type is (role, model, tools, MCP servers, limits, rules, hooks, sandbox).

A leaf: `config` reads its `agents` table with it and `agent_types` loads and applies types,
without either importing the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from ..models.options import ModelOption, option_list
from ..policy.hooks import HookTable
from ..sandbox.profiles import SandboxSetting
from ..tools.names import tool_allowed
from ..workspaces import Isolation
from .mcp_servers import McpServers

__all__ = ["GENERAL", "AgentType", "ApprovalRule", "definition_fields"]

GENERAL = "general"

ApprovalRule = Literal["allow", "ask", "deny"]


def _alias(name: str, camel: str) -> Any:
    return AliasChoices(name, camel)


class AgentType(BaseModel):
    """A kind of agent the main agent can start with `task(subagent_type=...)`, or run as itself.

    Unset fields are inherited from the parent (for a main agent: from its `AgentConfig`).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True, populate_by_name=True)

    description: str
    """When to use this type; the model reads it in the `task` tool's description."""
    prompt: str = ""
    """The type's role. Appended to the code-action system prompt (which it needs to act through the kernel)."""
    model: Any = None
    """A pydantic-ai model string (`anthropic:claude-haiku-4-5`, …) or `Model`; unset: the parent's model."""
    model_settings: dict[str, Any] | None = Field(
        default=None, validation_alias=_alias("model_settings", "modelSettings")
    )
    """pydantic-ai `ModelSettings`; unset: the parent's (when the model is inherited too)."""
    models: Annotated[list[ModelOption] | None, BeforeValidator(option_list)] = None
    """Models a `task` call may pick for this type (`model`), each a string or a table with its own connection;
    unset: the config's `subagent_models`. The type's own (or inherited) model stays the default."""
    base_url: str | None = Field(default=None, validation_alias=_alias("base_url", "baseUrl"))
    """Points the provider the model's prefix names at another endpoint (a bare model name: OpenAI-compatible)."""
    api_key_env: str | None = Field(default=None, validation_alias=_alias("api_key_env", "apiKeyEnv"))
    """The environment variable that holds the API key for this type's model."""
    tools: list[str] | None = None
    """Tools it may use: names or glob patterns (`execute_ipython_cell`, `reset_kernel`, `<server>_<tool>`).

    Unset: all its parent has, minus `task`. A Claude Code style `"Read, Grep"` string works too."""
    disallowed_tools: list[str] = Field(
        default_factory=list, validation_alias=_alias("disallowed_tools", "disallowedTools")
    )
    """Names or glob patterns of tools to remove. Without `execute_ipython_cell` the agent gets no kernel at all."""
    mcp_servers: McpServers = Field(
        default_factory=dict, validation_alias=_alias("mcp_servers", "mcpServers")
    )
    """MCP servers of its own (`mcpServers` shape), added to the inherited ones (same name: replaced)."""
    max_turns: int | None = Field(default=None, ge=1, validation_alias=_alias("max_turns", "maxTurns"))
    """Its default turn limit; a `task` call's `max_turns` wins when given."""
    max_children: int | None = Field(default=None, ge=1, validation_alias=_alias("max_children", "maxChildren"))
    """How many subagents an agent of this type may start over its life; unset: the config's `max_children`."""
    model_retries: int | None = Field(default=None, ge=0, validation_alias=_alias("model_retries", "modelRetries"))
    """How many times a failed model request of its agents is retried (as `AgentConfig.model_retries`); unset: the
    parent's."""
    stream_idle_timeout: float | None = Field(
        default=None, gt=0, validation_alias=_alias("stream_idle_timeout", "streamIdleTimeout")
    )
    """Seconds its model's stream may stay silent before the request is retried; unset: the parent's."""
    mode: Literal["primary", "subagent", "all"] = "all"
    """Where it may run: `primary` only as the main agent (`--agent`), `subagent` only through `task`, `all` both."""
    max_cost: float | None = Field(default=None, gt=0, validation_alias=_alias("max_cost", "maxCost"))
    """Its default cost budget in USD (its model's price must be known); a `task` call's `max_cost` wins."""
    mcp_tools: Literal["calls", "code", "both"] | None = Field(
        default=None, validation_alias=_alias("mcp_tools", "mcpTools")
    )
    """How its MCP tools are offered: tool calls, Python functions in its kernel, or both; unset: the parent's."""
    hooks: HookTable = Field(default_factory=dict)
    """Hooks of its own (as `AgentConfig.hooks`), for agents of this type only; added to the config's."""
    sandbox: SandboxSetting = None
    """Its sandbox profile (a name or a table, as `AgentConfig.sandbox`); it can only narrow its parent's."""
    isolation: Isolation | None = None
    """How its kernel sees the working folder: `shared` (its writes land at once) or `copy-on-write` (a view of
    its own, its writes come back as a change set that is applied by a decision); unset: `shared`. A `task` call's
    `isolation` wins."""
    approvals: dict[str, ApprovalRule] = Field(default_factory=dict)
    """Rules by tool pattern: `allow` (run without asking), `ask` (default) or `deny` (never run, nobody asked)."""
    instructions: bool = True
    """Whether its agents' system prompt holds the instructions (`AGENTS.md`: the person's, then the project's)."""
    skills: list[str] = Field(default_factory=list)
    """Skills preloaded, by name: each one's whole instructions are in its agents' system prompt from the start."""
    available_skills: list[str] | None = Field(
        default=None, validation_alias=_alias("available_skills", "availableSkills")
    )
    """Names or glob patterns of the skills its agents see (each listed by name and description, read with
    `load_skill` when needed); unset: every skill; `[]`: none."""
    color: str | None = Field(default=None, pattern=r"^(#[0-9A-Fa-f]{6}|[A-Za-z][A-Za-z0-9_]*)$")
    """The colour its agents' labels are drawn in, in the terminal (`blue`, `purple`, `#5f87ff`); unset: the next
    colour of the palette. A name the terminal does not know is left for the palette's."""

    @field_validator("tools", "disallowed_tools", "skills", "available_skills", mode="before")
    @classmethod
    def _tool_list(cls, value: Any) -> Any:
        # Claude Code writes `tools: Read, Grep`; OpenCode writes `tools: {write: false}` (handled in files)
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("model", mode="before")
    @classmethod
    def _inherit(cls, value: Any) -> Any:
        return None if value == "inherit" else value

    @property
    def needs_kernel(self) -> bool:
        """Whether this type may run code (else it gets no kernel process at all)."""
        return tool_allowed("execute_ipython_cell", self.tools, self.disallowed_tools)


def definition_fields(value: Mapping[str, Any]) -> dict[str, Any]:
    """A definition's fields as written in a file or table, minus `name`; OpenCode's `tools: {x: false}` disallows x."""
    fields = {k: v for k, v in value.items() if k != "name"}
    tools = fields.get("tools")
    if isinstance(tools, Mapping) and all(isinstance(v, bool) for v in tools.values()):
        off = [name for name, on in tools.items() if not on]
        fields = {k: v for k, v in fields.items() if k != "tools"}
        key = "disallowedTools" if "disallowedTools" in fields else "disallowed_tools"
        existing = fields.get(key) or []
        fields[key] = [*([existing] if isinstance(existing, str) else existing), *off]
    return fields
