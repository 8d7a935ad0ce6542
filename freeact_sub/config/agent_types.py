"""Agent types: named kinds of agent, each with its own role, model, tools, MCP servers, turn limit and rules.

Where definitions come from, later ones replacing earlier ones by name:

1. the built-ins: `general` (a clone of its parent: everything inherited), and the read-only
   `explore`, `plan` and `review` (`builtin_types.py`);
2. user files `~/.config/freeact-sub/agents/*.md`;
3. project files `<working_dir>/.freeact-sub/agents/*.md` — those with powers (hooks, endpoints,
   keys' names, MCP servers, `allow` rules, a wider sandbox) only once the person trusts the
   folder (`project_trust.py`);
4. `AgentConfig.agents` — the config file's `agents` table, then the `agents` given in code.

A Markdown file is YAML front matter (the fields of `AgentType`, plus `name`, default
the file's name) and a body that is the `prompt`. camelCase spellings (`maxTurns`,
`disallowedTools`, `mcpServers`, …) are accepted, and so are Claude Code's and OpenCode's own
fields (`color`, `temperature`, `permissionMode`, …: `foreign_fields.py`). Every problem is a
`ConfigError` naming the file (or table) and the field.

This module is the public face of agent types: reading their files (`type_files.py`), applying one
to a config (`type_config.py`), checking them all before a start (`type_checks.py`) and the `task`
tool that lists them (`task_tool.py`).
"""

from __future__ import annotations

from ..tools.names import check_tool_names, tool_allowed, unmatched_patterns
from .builtin_types import BUILTIN_TYPES
from .definitions import GENERAL, AgentType, ApprovalRule, definition_fields
from .system_prompt import compose_system_prompt
from .task_tool import task_tool
from .type_checks import check_model_options, check_server_commands, check_types
from .type_config import configure, confine, model_options, pick_model, sandbox_for
from .type_files import (
    front_matter,
    load_agent_dir,
    load_agent_file,
    load_agent_types,
    parse_agent_markdown,
    project_agent_types,
    project_agents_dir,
    user_agents_dir,
    validated,
)

__all__ = [
    "BUILTIN_TYPES",
    "GENERAL",
    "AgentType",
    "ApprovalRule",
    "check_model_options",
    "check_server_commands",
    "check_tool_names",
    "check_types",
    "compose_system_prompt",
    "configure",
    "confine",
    "definition_fields",
    "front_matter",
    "load_agent_dir",
    "load_agent_file",
    "load_agent_types",
    "model_options",
    "parse_agent_markdown",
    "pick_model",
    "project_agent_types",
    "project_agents_dir",
    "sandbox_for",
    "task_tool",
    "tool_allowed",
    "unmatched_patterns",
    "user_agents_dir",
    "validated",
]
