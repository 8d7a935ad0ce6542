"""Checking agent types before anything starts: their models resolve, their MCP commands exist, they can run."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from ..errors import ConfigError
from ..models.options import ModelOption
from ..sandbox.profiles import SandboxProfile
from ..tools.names import tool_allowed
from .agent_config import AgentConfig
from .builtin_types import BUILTIN_TYPES
from .definitions import GENERAL, AgentType
from .mcp_servers import McpServerConfig, StdioServerConfig
from .type_config import configure, confine

__all__ = ["check_model_options", "check_server_commands", "check_types"]


def check_types(
    main: AgentConfig, agent_types: Mapping[str, AgentType], sandbox: SandboxProfile | None = None
) -> None:
    """Raise a `ConfigError` for any type that could not start, before the main agent starts anything.

    Each type that brings its own model (or endpoint) has it resolved (an unknown provider prefix,
    a bare model name without `base_url`, a missing `api_key_env` variable), and so has every model
    a `task` call may pick (`subagent_models`, a type's `models`); each stdio MCP server of the
    main agent and of every type must name a command that exists; a type that asks for
    `mcp_tools: code` must be able to run code. Without this, such a type failed only when the
    model first picked it.
    """
    check_server_commands(main.mcp_servers, "mcp_servers")
    check_model_options(main, main.subagent_models, "subagent_models")
    for name, definition in agent_types.items():
        settings = configure(main, definition, name)
        if definition.model is not None or definition.base_url is not None or definition.api_key_env is not None:
            try:
                settings.check_model()
            except ConfigError as exc:
                raise ConfigError(f"agent type {name!r}: {exc}") from None
        if definition.models is not None:
            check_model_options(main, definition.models, f"agent type {name!r}: models")
        check_server_commands(definition.mcp_servers, f"agent type {name!r}: mcp_servers")
        if sandbox is not None:
            confine(sandbox, definition, name, main)  # a profile this platform cannot enforce
        if definition.mcp_tools == "code" and not tool_allowed(
            "execute_ipython_cell", settings.tools, settings.disallowed_tools
        ):
            raise ConfigError(
                f"agent type {name!r}: mcp_tools is 'code', but the type cannot run code (its tools leave out "
                "execute_ipython_cell), so it could not call its MCP tools; use 'calls' or 'both', or allow "
                "execute_ipython_cell"
            )


def check_model_options(main: AgentConfig, options: list[ModelOption], field: str) -> None:
    """A `ConfigError` naming `field` and the entry for a listed model that does not resolve."""
    for index, option in enumerate(options):
        try:
            configure(main, BUILTIN_TYPES[GENERAL], GENERAL, choice=option).check_model()
        except ConfigError as exc:
            raise ConfigError(f"{field}[{index}]: {exc}") from None


def check_server_commands(servers: Mapping[str, McpServerConfig], field: str) -> None:
    """A `ConfigError` naming the server whose stdio command is neither on PATH nor an existing file."""
    for server, spec in servers.items():
        if not isinstance(spec, StdioServerConfig):
            continue
        path = (spec.env or {}).get("PATH") or os.environ.get("PATH")
        command = Path(spec.cwd or ".", spec.command) if os.sep in spec.command else None
        if shutil.which(spec.command, path=path) is None and not (command is not None and command.is_file()):
            raise ConfigError(f"{field}.{server}.command: {spec.command!r} is not found (not on PATH, not a file)")
