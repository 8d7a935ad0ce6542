"""Agent types: named kinds of agent, each with its own role, model, tools, MCP servers, turn limit and rules.

Where definitions come from, later ones replacing earlier ones by name:

1. the built-ins: `general` (a clone of its parent: everything inherited), and the read-only
   `explore`, `plan` and `review` (`builtin_types.py`);
2. user files `~/.config/freeact-sub/agents/*.md`;
3. project files `<working_dir>/.freeact-sub/agents/*.md` — those with powers (hooks, endpoints,
   keys' names, MCP servers, `allow` rules, a wider sandbox) only once the person trusts the
   folder (`project_trust.py`);
4. `AgentConfig.agents` — the config file's `agents` table, then the `agents` given in code.

A Markdown file is YAML front matter (the fields of `AgentDefinition`, plus `name`, default
the file's name) and a body that is the `prompt`. camelCase spellings (`maxTurns`,
`disallowedTools`, `mcpServers`, …) are accepted, and so are Claude Code's and OpenCode's own
fields (`color`, `temperature`, `permissionMode`, …: `foreign_fields.py`). Every problem is a
`ConfigError` naming the file (or table) and the field.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigError
from ..models.options import ModelOption, find_option
from ..sandbox import check_enforceable, meet
from ..sandbox.profiles import SandboxProfile
from ..tools import ToolSpec, builtin_tool
from ..tools.names import check_tool_names, tool_allowed, unmatched_patterns
from .agent_config import AgentConfig
from .builtin_types import BUILTIN_TYPES
from .definitions import GENERAL, AgentDefinition, ApprovalRule, definition_fields
from .foreign_fields import translate_foreign_fields
from .mcp_servers import McpServerConfig, StdioServerConfig
from .project_trust import ProjectFile, ProjectPowers, powers_of, project_powers

__all__ = [
    "BUILTIN_TYPES",
    "GENERAL",
    "AgentDefinition",
    "ApprovalRule",
    "check_tool_names",
    "check_types",
    "compose_system_prompt",
    "configure",
    "confine",
    "definition_fields",
    "front_matter",
    "load_agent_file",
    "load_agent_types",
    "model_options",
    "parse_agent_markdown",
    "pick_model",
    "project_agent_types",
    "task_tool",
    "tool_allowed",
    "unmatched_patterns",
    "user_agents_dir",
]

def user_agents_dir() -> Path:
    """`~/.config/freeact-sub/agents`: the person's own agent types."""
    return Path.home() / ".config" / "freeact-sub" / "agents"


def project_agents_dir(working_dir: Path) -> Path:
    """`<working_dir>/.freeact-sub/agents`: the project's agent types."""
    return working_dir / ".freeact-sub" / "agents"


def validated(name: str, value: Any, source: str) -> AgentDefinition:
    """An `AgentDefinition` from `value` (a definition or a dict); a `ConfigError` names `source`, type and field."""
    if isinstance(value, AgentDefinition):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(f"{source}: agent type {name!r} must be a table of fields, got {type(value).__name__}")
    where = f"{source}.{name}" if source == "agents" else source
    try:
        return AgentDefinition.model_validate(translate_foreign_fields(definition_fields(value), where))
    except ValidationError as exc:
        lines = []
        for error in exc.errors(include_url=False):
            location = ".".join(str(part) for part in error["loc"]) or "(top level)"
            lines.append(f"{location}: {error['msg']}")
        raise ConfigError(f"{source}: agent type {name!r}:\n  " + "\n  ".join(lines)) from None


def parse_agent_markdown(text: str, source: str, default_name: str) -> tuple[str, AgentDefinition]:
    """`(name, definition)` from a Markdown file's text: YAML front matter between `---` lines, body = prompt."""
    front, body = front_matter(text, source)
    name = front.get("name", default_name)
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{source}: name: expected a non-empty string")
    if body and "prompt" in front:
        raise ConfigError(f"{source}: prompt: given both in the front matter and as the body; use one")
    fields = {**front, "prompt": front.get("prompt", body)}
    return name.strip(), validated(name.strip(), fields, source)


def front_matter(text: str, source: str) -> tuple[dict[str, Any], str]:
    """A Markdown file's YAML front matter (between `---` lines) and its stripped body; errors name `source`."""
    import yaml

    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise ConfigError(f"{source}: expected YAML front matter: a first line `---`, the fields, then `---`")
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        raise ConfigError(f"{source}: the front matter is not closed by a `---` line")
    try:
        front = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: the front matter is not valid YAML: {exc}") from None
    if front is None:
        front = {}
    if not isinstance(front, dict):
        raise ConfigError(f"{source}: the front matter must be a mapping of fields, got {type(front).__name__}")
    return front, "".join(lines[end + 1 :]).strip()


def load_agent_file(path: Path) -> tuple[str, AgentDefinition]:
    """Read one Markdown agent type file."""
    name, _, definition = _read_agent_file(path)
    return name, definition


def _read_agent_file(path: Path) -> tuple[str, str, AgentDefinition]:
    """`(name, text, definition)` of one Markdown agent type file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the agent type file: {exc}") from None
    name, definition = parse_agent_markdown(text, str(path), path.stem)
    return name, text, definition


def _agent_files(folder: Path) -> list[tuple[Path, str, str, AgentDefinition]]:
    """`(path, name, text, definition)` of every `*.md` agent type in `folder` (none if it does not exist)."""
    if not folder.is_dir():
        return []
    found: list[tuple[Path, str, str, AgentDefinition]] = []
    seen: dict[str, Path] = {}
    for path in sorted(folder.glob("*.md")):
        name, text, definition = _read_agent_file(path)
        if name in seen:
            raise ConfigError(f"{path}: name: {name!r} is already defined in {seen[name]}")
        seen[name] = path
        found.append((path, name, text, definition))
    return found


def load_agent_dir(folder: Path) -> dict[str, AgentDefinition]:
    """Every `*.md` agent type in `folder` (none if it does not exist), by name."""
    return {name: definition for _, name, _, definition in _agent_files(folder)}


def project_agent_types(working_dir: Path, *, store: Path | None = None) -> ProjectPowers:
    """The project's agent type files in `working_dir`, each with its powers, and whether the folder is trusted.

    `store`: the file trust is remembered in (default `~/.config/freeact-sub/trusted-folders.json`).
    """
    files = [
        ProjectFile(path=path, text=text, name=name, definition=definition,
                    powers=powers_of(definition, working_dir))
        for path, name, text, definition in _agent_files(project_agents_dir(working_dir))
    ]
    return project_powers(working_dir, files, store)


def load_agent_types(
    agents: Mapping[str, Any],
    working_dir: Path,
    *,
    user_dir: Path | None = None,
    trust_project: bool | None = None,
    store: Path | None = None,
    servers: Iterable[str] | None = None,
) -> dict[str, AgentDefinition]:
    """All the agent types, by name, in precedence order: built-in < user files < project files < `agents`.

    The project's files with powers load only when `trust_project` is True, or when it is None and
    the person trusts the folder (remembered in `store`); with None and an untrusted folder they are
    a `ConfigError` naming each file and field, with False they are left out. Files without powers
    always load.

    With `servers` (the config's MCP server names), every `tools` / `disallowed_tools` entry must be
    able to name a tool: a built-in one, or `<server>_…` of one of those servers or of a type's own
    (`check_tool_names`); else a `ConfigError` names the file and the field.
    """
    types = dict(BUILTIN_TYPES)
    sources: dict[str, str] = {}
    for path, name, _, definition in _agent_files(user_dir if user_dir is not None else user_agents_dir()):
        types[name], sources[name] = definition, str(path)
    project = project_agent_types(working_dir, store=store)
    applied = not project.powerful or project.applies(trust_project)
    for file in project.files:
        if applied or not file.powers:
            types[file.name], sources[file.name] = file.definition, str(file.path)
    for name, value in agents.items():
        types[name], sources[name] = validated(name, value, "agents"), f"agents.{name}"
    if servers is not None:
        known = {*servers, *(server for definition in types.values() for server in definition.mcp_servers)}
        for name, source in sources.items():
            definition = types[name]
            where = source if source.startswith("agents.") else f"{source}: agent type {name!r}"
            check_tool_names(definition.tools or [], f"{where}: tools", known)
            check_tool_names(definition.disallowed_tools, f"{where}: disallowed_tools", known)
    return types


def configure(
    base: AgentConfig, definition: AgentDefinition, name: str, *, model: Any = None, choice: ModelOption | None = None
) -> AgentConfig:
    """The config an agent of type `name` runs with: `base` (its parent's, or the main agent's) with the type applied.

    A type that names a `model` brings its own connection: its `base_url`, `api_key_env` and
    `model_settings` (unset: the provider's defaults), never the parent's. A type without a
    `model` keeps the parent's (`model`: the parent's resolved `Model`, when given); a
    `base_url` or `api_key_env` of its own then points the parent's model name elsewhere.
    `choice` (a model the `task` call picked from the allowlist) replaces the model, with its own connection.
    """
    update: dict[str, Any] = {}
    if choice is not None:
        update.update(model=choice.model, base_url=choice.base_url, api_key_env=choice.api_key_env,
                      model_settings=choice.model_settings)
    elif definition.model is not None:
        update.update(
            model=definition.model,
            base_url=definition.base_url,
            api_key_env=definition.api_key_env,
            model_settings=definition.model_settings,
        )
    else:
        if definition.base_url is not None or definition.api_key_env is not None:
            if not isinstance(base.model, str):
                raise ConfigError(
                    f"agent type {name!r}: base_url: needs a model name, but the inherited model is a "
                    f"{type(base.model).__name__} object; set the type's `model` too"
                )
            update.update(
                base_url=definition.base_url or base.base_url, api_key_env=definition.api_key_env or base.api_key_env
            )
        elif model is not None:
            update["model"] = model
        if definition.model_settings is not None:
            update["model_settings"] = definition.model_settings
    if definition.mcp_servers:
        update["mcp_servers"] = {**base.mcp_servers, **definition.mcp_servers}
    if definition.tools is not None:
        update["tools"] = list(definition.tools)
    if definition.disallowed_tools:
        update["disallowed_tools"] = [*base.disallowed_tools, *definition.disallowed_tools]
    if definition.max_turns is not None:
        update["max_turns"] = definition.max_turns
    if definition.mcp_tools is not None:
        update["mcp_tools"] = definition.mcp_tools
    if definition.max_children is not None:
        update["max_children"] = definition.max_children
    if definition.model_retries is not None:
        update["model_retries"] = definition.model_retries
    if definition.stream_idle_timeout is not None:
        update["stream_idle_timeout"] = definition.stream_idle_timeout
    return base.model_copy(update=update) if update else base


def sandbox_for(parent: SandboxProfile, definition: AgentDefinition, name: str, base: AgentConfig) -> SandboxProfile:
    """The sandbox profile an agent of type `name` runs under, started by an agent running under `parent`.

    The type's own profile narrows the parent's (`meet`); a ConfigError if the result is a
    sandbox this platform cannot enforce.
    """
    if definition.sandbox is None:
        return parent
    profile = meet(parent, definition.sandbox, base.working_dir)
    if profile is not parent:
        try:
            check_enforceable(profile, gateway=base.kernel_gateway is not None)
        except ConfigError as exc:
            raise ConfigError(f"agent type {name!r}: {exc}") from None
    return profile


def confine(
    parent: SandboxProfile, definition: AgentDefinition, name: str, base: AgentConfig
) -> tuple[SandboxProfile, AgentDefinition]:
    """The sandbox profile an agent of type `name` runs under, and the definition it runs with.

    As `sandbox_for`, except for a built-in type (`explore`, `plan`, `review`) where the platform
    cannot enforce its profile: it runs under its parent's profile instead of failing, without the
    rules that only the sandbox made safe (`explore`'s cells are then asked, as any other).
    """
    try:
        return sandbox_for(parent, definition, name, base), definition
    except ConfigError:
        if BUILTIN_TYPES.get(name) is not definition:
            raise
        return parent, definition.model_copy(update={"approvals": {}})


def model_options(definition: AgentDefinition, settings: AgentConfig) -> list[ModelOption]:
    """The models a `task` call may pick for a child of this type: the type's `models`, else the config's."""
    return list(definition.models) if definition.models is not None else list(settings.subagent_models)


def pick_model(
    definition: AgentDefinition, name: str, settings: AgentConfig, model: Any, picked: str
) -> ModelOption | str:
    """The model a `task` call's `model` (`picked`) names for a child of type `name`, or the refusal the model reads.

    Allowed: the type's `models` (else `settings.subagent_models`, the calling agent's), and the
    model the child would run on anyway, by name (the type's own, else the caller's: `settings`'
    model string, or `model`, its resolved `Model`).
    """
    options = model_options(definition, settings)
    if definition.model is not None:
        default = ModelOption(model=definition.model, base_url=definition.base_url,
                              api_key_env=definition.api_key_env, model_settings=definition.model_settings)
    else:
        default = ModelOption(model=settings.model if isinstance(settings.model, str) else model,
                              base_url=settings.base_url, api_key_env=settings.api_key_env,
                              model_settings=settings.model_settings)
    found = find_option([*options, default], picked)
    if found is not None:
        return found
    if not options:
        return (f"No models are offered to pick for a `{name}` subagent: no subagent started. Leave out "
                f"`model` (it runs on `{default.name}`).")
    names = ", ".join(f"`{option.name}`" for option in options)
    return (f"The model {picked!r} is not one you may pick for a `{name}` subagent: no subagent started. "
            f"The allowed models are {names} (or leave out `model` for `{default.name}`).")


def check_types(
    main: AgentConfig, types: Mapping[str, AgentDefinition], sandbox: SandboxProfile | None = None
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
    for name, definition in types.items():
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


def compose_system_prompt(base: str, role: str, mcp_section: str = "") -> str:
    """The system prompt an agent sends: the code-action prompt, then its type's role, then its MCP tools' section."""
    if not role.strip() and not mcp_section.strip():
        return base
    parts = [base.rstrip()]
    if role.strip():
        parts.append("## Your role\n\n" + role.strip())
    if mcp_section.strip():
        parts.append(mcp_section.strip())
    return "\n\n".join(parts) + "\n"


def task_tool(types: Mapping[str, AgentDefinition], settings: AgentConfig | None = None) -> ToolSpec:
    """The `task` tool as the model sees it: its JSON definition, with the agent types and the models it may
    pick for them listed (`settings`: the calling agent's, whose `subagent_models` apply to types without a list)."""
    spec = builtin_tool("task")
    shared = list(settings.subagent_models) if settings is not None else []
    lines = []
    for name, definition in types.items():
        if definition.mode == "primary":
            continue
        line = f"- `{name}`: {' '.join(definition.description.split())}"
        if definition.models is not None and [o.name for o in definition.models] != [o.name for o in shared]:
            names = ", ".join(f"`{option.name}`" for option in definition.models)
            line += f" (`model`: {names})" if names else " (no `model` choice)"
        lines.append(line)
    description = f"{spec.description}\n\nAgent types for `subagent_type` (default `general`):\n" + "\n".join(lines)
    if shared:
        names = ", ".join(f"`{option.name}`" for option in shared)
        description += (f"\n\nModels for `model` (leave it out for the agent type's own model; a type that lists its "
                        f"own above takes only those): {names}")
    parameters = spec.parameters
    if not shared and not any(definition.models for definition in types.values()):  # nothing to choose from
        properties = {k: v for k, v in parameters["properties"].items() if k != "model"}
        parameters = {**parameters, "properties": properties}
    return ToolSpec(name=spec.name, description=description, parameters=parameters)
