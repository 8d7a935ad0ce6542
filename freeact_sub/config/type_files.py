"""Agent type files: Markdown with YAML front matter, from the person's folder and the project's, by precedence.

See `agent_types.py` for where types come from; every problem is a `ConfigError` naming the file and field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigError
from ..tools.names import check_tool_names
from .builtin_types import BUILTIN_TYPES
from .definitions import AgentType, definition_fields
from .foreign_fields import translate_foreign_fields
from .loading import error_lines
from .project_trust import ProjectFile, ProjectPowers, powers_of, project_powers

__all__ = [
    "front_matter", "load_agent_dir", "load_agent_file", "load_agent_types", "parse_agent_markdown",
    "project_agent_types", "project_agents_dir", "user_agents_dir", "validated",
]


def user_agents_dir() -> Path:
    """`~/.config/freeact-sub/agents`: the person's own agent types."""
    return Path.home() / ".config" / "freeact-sub" / "agents"


def project_agents_dir(working_dir: Path) -> Path:
    """`<working_dir>/.freeact-sub/agents`: the project's agent types."""
    return working_dir / ".freeact-sub" / "agents"


def validated(name: str, value: Any, source: str) -> AgentType:
    """An `AgentType` from `value` (a definition or a dict); a `ConfigError` names `source`, type and field."""
    if isinstance(value, AgentType):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(f"{source}: agent type {name!r} must be a table of fields, got {type(value).__name__}")
    where = f"{source}.{name}" if source == "agents" else source
    try:
        return AgentType.model_validate(translate_foreign_fields(definition_fields(value), where))
    except ValidationError as exc:
        raise ConfigError(f"{source}: agent type {name!r}:\n  " + "\n  ".join(error_lines(exc))) from None


def parse_agent_markdown(text: str, source: str, default_name: str) -> tuple[str, AgentType]:
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


def load_agent_file(path: Path) -> tuple[str, AgentType]:
    """Read one Markdown agent type file."""
    name, _, definition = _read_agent_file(path)
    return name, definition


def _read_agent_file(path: Path) -> tuple[str, str, AgentType]:
    """`(name, text, definition)` of one Markdown agent type file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the agent type file: {exc}") from None
    name, definition = parse_agent_markdown(text, str(path), path.stem)
    return name, text, definition


def _agent_files(folder: Path) -> list[tuple[Path, str, str, AgentType]]:
    """`(path, name, text, definition)` of every `*.md` agent type in `folder` (none if it does not exist)."""
    if not folder.is_dir():
        return []
    found: list[tuple[Path, str, str, AgentType]] = []
    seen: dict[str, Path] = {}
    for path in sorted(folder.glob("*.md")):
        name, text, definition = _read_agent_file(path)
        if name in seen:
            raise ConfigError(f"{path}: name: {name!r} is already defined in {seen[name]}")
        seen[name] = path
        found.append((path, name, text, definition))
    return found


def load_agent_dir(folder: Path) -> dict[str, AgentType]:
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
) -> dict[str, AgentType]:
    """All the agent types, by name, in precedence order: built-in < user files < project files < `agents`.

    The project's files with powers load only when `trust_project` is True, or when it is None and
    the person trusts the folder (remembered in `store`); with None and an untrusted folder they are
    a `ConfigError` naming each file and field, with False they are left out. Files without powers
    always load.

    With `servers` (the config's MCP server names), every `tools` / `disallowed_tools` entry must be
    able to name a tool: a built-in one, or `<server>_…` of one of those servers or of a type's own
    (`check_tool_names`); else a `ConfigError` names the file and the field.
    """
    agent_types = dict(BUILTIN_TYPES)
    sources: dict[str, str] = {}
    for path, name, _, definition in _agent_files(user_dir if user_dir is not None else user_agents_dir()):
        agent_types[name], sources[name] = definition, str(path)
    project = project_agent_types(working_dir, store=store)
    applied = not project.powerful or project.applies(trust_project)
    for file in project.files:
        if applied or not file.powers:
            agent_types[file.name], sources[file.name] = file.definition, str(file.path)
    for name, value in agents.items():
        agent_types[name], sources[name] = validated(name, value, "agents"), f"agents.{name}"
    if servers is not None:
        known = {*servers, *(server for definition in agent_types.values() for server in definition.mcp_servers)}
        for name, source in sources.items():
            definition = agent_types[name]
            where = source if source.startswith("agents.") else f"{source}: agent type {name!r}"
            check_tool_names(definition.tools or [], f"{where}: tools", known)
            check_tool_names(definition.disallowed_tools, f"{where}: disallowed_tools", known)
    return agent_types
