"""Instructions (`AGENTS.md`) and skills (agentskills.io folders with a `SKILL.md`): where they are and how they read.

- Instructions: the person's `~/.config/freeact-sub/AGENTS.md`, then the working folder's `AGENTS.md`.
- Skills: `~/.config/freeact-sub/skills/<name>/SKILL.md`, then the project's `.agents/skills/<name>/` (the shared
  convention), then `.freeact-sub/skills/<name>/`; a later folder's skill replaces an earlier one of that name.

A `SKILL.md` is YAML front matter with `name` (lowercase letters, digits and single hyphens, at most 64
characters, the folder's own name) and `description` (at most 1024 characters), then the instructions. A
missing file is nothing to read; an unreadable or malformed one a `ConfigError` naming the file (and field).
Nothing is read through a link: a link where a file or skill folder should be is left out and named
(`PromptFiles.left_out`), since a link in a project can point at a secret of the person's.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import ConfigError
from ..sandbox.safe_files import folders_inside, read_inside
from .front_matter import front_matter

__all__ = [
    "INSTRUCTIONS_FILE",
    "PROJECT_SKILL_FOLDERS",
    "SKILL_FILE",
    "Instructions",
    "Skill",
    "parse_skill",
    "read_instructions",
    "read_skills",
    "skill_reply",
    "skill_texts",
    "user_config_dir",
]

INSTRUCTIONS_FILE = "AGENTS.md"
SKILL_FILE = "SKILL.md"
PROJECT_SKILL_FOLDERS = (".agents/skills", ".freeact-sub/skills")
"""The project's skill folders, in the working folder, in precedence order (the last wins a name)."""
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_MAX_BYTES = 1_000_000

Source = Literal["user", "project"]


def user_config_dir() -> Path:
    """`~/.config/freeact-sub`: the person's `AGENTS.md` and `skills/` (a kernel can neither read nor write it)."""
    return Path.home() / ".config" / "freeact-sub"


@dataclass(frozen=True, kw_only=True)
class Instructions:
    """One `AGENTS.md`, as read."""

    path: Path
    text: str
    source: Source


@dataclass(frozen=True, kw_only=True)
class Skill:
    """One skill: its name and description (always in the prompt) and its instructions (read when needed)."""

    name: str
    description: str
    body: str
    """The instructions: the `SKILL.md` after its front matter."""
    text: str
    """The whole `SKILL.md` as read (what project trust hashes)."""
    folder: Path
    """Its folder: scripts and references are files in it."""
    source: Source
    root: Path
    """The folder it was found below (the working folder, `~/.config/freeact-sub`): nothing below it is read
    through a link."""

    @property
    def path(self) -> Path:
        """Its `SKILL.md`."""
        return self.folder / SKILL_FILE


def _read(base: Path, relative: str, what: str) -> str | None:
    """The text of `base/relative`; None if missing; `_Link` if a link is on the way; else a `ConfigError`."""
    try:
        data = read_inside(base, relative, limit=_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _Link(base / relative) from None
        raise ConfigError(f"{base / relative}: cannot read the {what}: {exc.strerror or exc}") from None
    if len(data) > _MAX_BYTES:
        raise ConfigError(f"{base / relative}: the {what} is larger than {_MAX_BYTES:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{base / relative}: the {what} is not UTF-8 text ({exc.reason} at byte {exc.start})"
                          ) from None


class _Link(Exception):
    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.path = path


def _left_out(path: Path) -> str:
    return f"{path}: a link, not read (nothing is read through a link; put the file itself there)"


def read_instructions(base: Path, source: Source, left_out: list[str]) -> Instructions | None:
    """`base/AGENTS.md` if there is one (a link is left out and noted in `left_out`)."""
    try:
        text = _read(base, INSTRUCTIONS_FILE, "instructions file")
    except _Link as link:
        left_out.append(_left_out(link.path))
        return None
    if text is None or not text.strip():
        return None
    return Instructions(path=base / INSTRUCTIONS_FILE, text=text, source=source)


def parse_skill(text: str, source: str, folder_name: str) -> tuple[str, str, str]:
    """`(name, description, body)` of a `SKILL.md`'s text; a `ConfigError` names `source` and the field."""
    front, body = front_matter(text, source)
    name = front.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{source}: name: required, a non-empty string (the skill folder's name, {folder_name!r})")
    if len(name) > 64 or not _NAME.match(name):
        raise ConfigError(f"{source}: name: {name!r} must be at most 64 lowercase letters, digits and single hyphens")
    if name != folder_name:
        raise ConfigError(f"{source}: name: {name!r} must be the name of its folder, {folder_name!r}")
    description = front.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ConfigError(f"{source}: description: required, a non-empty string saying what the skill does and "
                          "when to use it")
    if len(description) > 1024:
        raise ConfigError(f"{source}: description: at most 1024 characters, got {len(description)}")
    return name, " ".join(description.split()), body


def read_skills(base: Path, folder: str, source: Source, left_out: list[str]) -> list[Skill]:
    """The skills in `base/folder` (none if it is missing), by folder name; links are left out and noted; a
    malformed `SKILL.md` is a `ConfigError` naming the file and field."""
    skills = []
    for name, relative, text in skill_texts(base, folder, left_out):
        parsed, description, body = parse_skill(text, str(base / relative), name)
        skills.append(Skill(name=parsed, description=description, body=body, text=text,
                            folder=base / folder / name, source=source, root=base))
    return skills


def skill_texts(base: Path, folder: str, left_out: list[str]) -> list[tuple[str, str, str]]:
    """`(folder name, path relative to base, text)` of each `SKILL.md` in `base/folder`, not parsed (a project's
    malformed skill is still a file of the project, to be trusted or left out); links are left out and noted."""
    try:
        names, links = folders_inside(base, folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            left_out.append(_left_out(base / folder))
            return []
        raise ConfigError(f"{base / folder}: cannot read the skills folder: {exc.strerror or exc}") from None
    left_out.extend(_left_out(base / folder / link) for link in links)
    found = []
    for name in names:
        relative = f"{folder}/{name}/{SKILL_FILE}"
        try:
            text = _read(base, relative, "skill file")
        except _Link as link:
            left_out.append(_left_out(link.path))
            continue
        if text is not None:  # a folder without a SKILL.md is not a skill (scripts of another kind, say)
            found.append((name, relative, text))
    return found


def by_name(skills: Iterable[Skill]) -> dict[str, Skill]:
    """Skills by name, a later one replacing an earlier one of the same name."""
    return {skill.name: skill for skill in skills}


def skill_reply(skills: Mapping[str, Skill], name: str, file: str | None = None) -> tuple[str, bool]:
    """What `load_skill` answers, and whether it is an error the model reads: a skill's instructions, or one
    of the files in its folder (read without following a link, at most 100,000 characters)."""
    skill = skills.get(name)
    if skill is None:
        known = ", ".join(sorted(skills)) or "none"
        return f"There is no skill {name!r} you can load. Your skills: {known}.", True
    if not file:
        files = _files_of(skill.folder)
        listed = f" Its files: {', '.join(files)}." if files else ""
        return f"{skill.body.strip()}\n\n(Skill `{skill.name}`, folder {skill.folder}.{listed})", False
    try:
        data = read_inside(skill.root, skill.folder.relative_to(skill.root) / file, limit=100_001)
    except ValueError:
        return f"{file!r} is not a path inside the skill's folder (no `..`, not absolute).", True
    except OSError as exc:
        why = "a link (not followed)" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else (exc.strerror or str(exc))
        return f"Cannot read {file!r} of skill {name!r}: {why}.", True
    try:
        text = data[:100_000].decode("utf-8")
    except UnicodeDecodeError:
        return f"{file!r} of skill {name!r} is not UTF-8 text; use it from your kernel at {skill.folder / file}.", True
    return text + ("\n[cut at 100,000 characters]" if len(data) > 100_000 else ""), False


def _files_of(folder: Path, most: int = 40) -> list[str]:
    """The files in a skill's folder but its `SKILL.md`, relative to it (links named, never entered)."""
    found: list[str] = []
    for place, subfolders, files in os.walk(folder, followlinks=False):
        subfolders.sort()
        for name in sorted(files):
            relative = str(Path(place, name).relative_to(folder))
            if relative != SKILL_FILE:
                found.append(relative)
            if len(found) >= most:
                return [*found, "…"]
    return found
