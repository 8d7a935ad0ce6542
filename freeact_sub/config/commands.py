"""The person's own commands: Markdown prompt templates run as `/name arguments`.

Where they come from, project files replacing the person's by name (the places agent types
are found, in a `commands` folder instead of `agents`):

1. `~/.config/freeact-sub/commands/*.md`;
2. `<working_dir>/.freeact-sub/commands/*.md`.

A file's name is the command's name (`review.md` is `/review`). Its optional YAML front matter
has `description` (what `/help` shows), `agent` (an agent type: the command runs as a subagent
of that type, as `@type` does) and `model` (the model of the turn, or of that subagent). The
body is the prompt; `$ARGUMENTS` in it is replaced by what follows the command's name (without
`$ARGUMENTS`, arguments are added after the body).

Each file is read on its own (`read_commands`): a bad one is left out and its problems are kept,
every field of it named, so one typo does not take every other command away. `agent` is checked
against the agent types when the files are read, not when the command runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ConfigError
from .type_files import front_matter

__all__ = ["Command", "CommandFiles", "load_commands", "project_commands_dir", "read_commands", "user_commands_dir"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def user_commands_dir() -> Path:
    """`~/.config/freeact-sub/commands`: the person's own commands."""
    return Path.home() / ".config" / "freeact-sub" / "commands"


def project_commands_dir(working_dir: Path) -> Path:
    """`<working_dir>/.freeact-sub/commands`: the project's commands."""
    return working_dir / ".freeact-sub" / "commands"


class _Front(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    agent: str | None = None
    model: str | None = None


@dataclass(frozen=True, kw_only=True)
class Command:
    """One command file: `/name arguments` runs `prompt(arguments)`."""

    name: str
    """The command's name: its file's name without `.md`."""
    template: str
    """The body: the prompt, with `$ARGUMENTS` where the arguments go."""
    description: str = ""
    """What it does (shown by `/help`)."""
    agent: str | None = None
    """An agent type: the command runs as a subagent of that type (`stream(..., agent_type=agent)`)."""
    model: str | None = None
    """The model of the command's turn (or of its subagent); None: the usual one."""
    path: Path | None = None
    """The file it was read from."""

    def check(self, types: Iterable[str]) -> Command:
        """This command, if its `agent` is one of `types`; else a `ConfigError` naming its file and the field."""
        check_command_agent(self, types)
        return self

    def prompt(self, arguments: str = "") -> str:
        """The prompt for `arguments`: `$ARGUMENTS` replaced, or the arguments added after the body."""
        arguments = arguments.strip()
        if "$ARGUMENTS" in self.template:
            return self.template.replace("$ARGUMENTS", arguments).strip()
        return f"{self.template}\n\n{arguments}".strip() if arguments else self.template



def check_command_agent(command: Command, types: Iterable[str]) -> None:
    """A `ConfigError` naming the command's file if its `agent` is no agent type of `types`."""
    names = sorted(types)
    if command.agent is not None and command.agent not in names:
        raise ConfigError(f"{command.path or command.name}: agent: unknown agent type {command.agent!r}; the known "
                          f"types are {', '.join(names)}")


def load_command_file(path: Path, types: Iterable[str] | None = None) -> Command:
    """Read one command file; a `ConfigError` names the file and every field at fault.

    With `types` (the agent type names), an `agent` that is none of them is one of the faults.
    """
    source = str(path)
    if not _NAME.fullmatch(path.stem):
        raise ConfigError(f"{source}: the file name {path.stem!r} is no command name (letters, digits, `_.-`)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read the command file: {exc}") from None
    if text.lstrip("\ufeff").lstrip().startswith("---"):
        front, body = front_matter(text.lstrip(), source)
    else:
        front, body = {}, text.strip()
    problems: list[str] = []
    fields = _Front()
    try:
        fields = _Front.model_validate(front)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            location = ".".join(str(part) for part in error["loc"]) or "(top level)"
            message = "unknown field (use description, agent, model)" if error["type"] == "extra_forbidden" else (
                error["msg"])
            problems.append(f"{location}: {message}")
        agent = front.get("agent")
        fields = _Front(agent=agent) if isinstance(agent, str) else fields
    if types is not None and fields.agent is not None and fields.agent not in set(types):
        problems.append(f"agent: unknown agent type {fields.agent!r}; the known types are {', '.join(sorted(types))}")
    if not body:
        problems.append("the body (the prompt) is empty")
    if problems:
        raise ConfigError(f"{source}: " + "; ".join(problems))
    return Command(name=path.stem, template=body, description=" ".join(fields.description.split()),
                   agent=fields.agent, model=fields.model, path=path)


@dataclass(frozen=True)
class CommandFiles:
    """The command files as read one by one: the good ones, and what is wrong with each bad one."""

    commands: dict[str, Command] = field(default_factory=dict)
    """The commands that can run, by name."""
    problems: dict[str, str] = field(default_factory=dict)
    """For each bad file, by command name: its path and every field at fault (a `ConfigError`'s message)."""

    def get(self, name: str) -> Command:
        """The command `name`; else a `ConfigError`: its file's problems, or the commands there are."""
        if name in self.commands:
            return self.commands[name]
        if name in self.problems:
            raise ConfigError(self.problems[name])
        known = ", ".join(f"/{c}" for c in sorted(self.commands)) or "none (add .freeact-sub/commands/NAME.md)"
        raise ConfigError(f"unknown command {name!r}; the commands are {known}")


def read_commands(
    working_dir: Path, *, user_dir: Path | None = None, types: Iterable[str] | None = None
) -> CommandFiles:
    """Every command file of the person (`user_dir`, default `~/.config/freeact-sub/commands`) and of the project
    in `working_dir`, each read on its own; a project file replaces the person's of the same name (a bad one too).
    With `types`, each `agent` is checked against them."""
    names = None if types is None else list(types)
    commands: dict[str, Command] = {}
    problems: dict[str, str] = {}
    for folder in (user_dir if user_dir is not None else user_commands_dir(), project_commands_dir(working_dir)):
        if folder.is_dir():
            for path in sorted(folder.glob("*.md")):
                commands.pop(path.stem, None)
                problems.pop(path.stem, None)
                try:
                    command = load_command_file(path, names)
                except ConfigError as exc:
                    problems[path.stem] = str(exc)
                else:
                    commands[command.name] = command
    return CommandFiles(commands, problems)


def load_commands(
    working_dir: Path, *, user_dir: Path | None = None, types: Iterable[str] | None = None
) -> dict[str, Command]:
    """As `read_commands`, but every bad file is one `ConfigError` that names each of them and their fields."""
    files = read_commands(working_dir, user_dir=user_dir, types=types)
    if files.problems:
        raise ConfigError("\n".join(files.problems[name] for name in sorted(files.problems)))
    return files.commands
