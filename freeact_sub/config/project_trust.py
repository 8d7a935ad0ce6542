"""Project trust: agent types that ship with a folder act with the person's rights only once the person trusts it.

A project's agent type (`<working_dir>/.freeact-sub/agents/*.md`) may come from someone else (a
cloned repository). A file has *powers* when it sets a field that acts without the person or
reaches past the machine with the person's keys:

- `hooks` (shell commands run in the host, with the person's rights, outside any sandbox);
- `base_url`, `api_key_env`, and the same fields of an entry of `models` (where the model's
  requests, and the key in a variable of the host, are sent);
- `mcp_servers` (commands started in the host, or URLs contacted, by every agent of the type);
- an `allow` rule in `approvals` (calls that run without asking the person);
- a `sandbox` wider than the default `workspace` (see `wider_than_default`).

The project's instructions (`AGENTS.md`) and skills (`.agents/skills/`, `.freeact-sub/skills/`) count as
files with powers too: they go into every agent's system prompt, and a sandboxed kernel, which cannot
change such a file that exists, can still create one that did not (nothing refuses a new name), for a later
run to read. So they are used once the person trusts the folder with them, as they are.

An untrusted project's files with powers are inert: not loaded at all (a type of the same name
from the person's own files, or a built-in, stays). Files without powers always load. Trust is
remembered per folder in `~/.config/freeact-sub/trusted-folders.json` together with a hash of
the files with powers, so a change to any of them (or a new one) asks again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError
from ..sandbox.profiles import BUILT_IN_PROFILES, SandboxProfile, meet
from .definitions import AgentType

__all__ = [
    "ProjectFile",
    "ProjectPowers",
    "forget_folder",
    "powers_of",
    "text_powers",
    "trusted_folders",
    "trusted_folders_file",
    "wider_than_default",
]


def trusted_folders_file() -> Path:
    """`~/.config/freeact-sub/trusted-folders.json`: the folders the person trusts, with the hash of their files."""
    return Path.home() / ".config" / "freeact-sub" / "trusted-folders.json"


def wider_than_default(profile: SandboxProfile, working_dir: Path) -> bool:
    """Whether `profile` allows anything the default `workspace` profile does not.

    Precisely: narrowing it by `workspace` (as a child's profile is narrowed by its parent's,
    `meet`) changes what it allows. That is: it is `off`, it may write somewhere outside the
    working folder, or it leaves readable a path `workspace` denies (and so on for every field a
    profile has; `workspace` allows network, so network alone is never wider).
    """
    if not profile.enforced:
        return True
    narrowed = meet(BUILT_IN_PROFILES["workspace"], profile, working_dir)
    return _allows(narrowed) != _allows(profile)


def _allows(profile: SandboxProfile) -> dict[str, Any]:
    """What a profile allows, field by field, lists as sets (their order means nothing)."""
    allowed: dict[str, Any] = {}
    for name in type(profile).model_fields:
        if name in ("name", "note"):
            continue
        value = getattr(profile, name)
        allowed[name] = frozenset(value) if isinstance(value, tuple | list) else value
    return allowed


def powers_of(definition: AgentType, working_dir: Path) -> tuple[str, ...]:
    """The fields of `definition` that carry powers, each as a person reads it (`approvals ('*': allow)`)."""
    found: list[str] = []
    events = [event for event, specs in definition.hooks.items() if specs]
    if events:
        found.append(f"hooks ({', '.join(events)})")
    if definition.base_url is not None:
        found.append(f"base_url ({definition.base_url})")
    if definition.api_key_env is not None:
        found.append(f"api_key_env ({definition.api_key_env})")
    for index, option in enumerate(definition.models or []):
        if option.base_url is not None:
            found.append(f"models[{index}].base_url ({option.base_url})")
        if option.api_key_env is not None:
            found.append(f"models[{index}].api_key_env ({option.api_key_env})")
    if definition.mcp_servers:
        found.append(f"mcp_servers ({', '.join(definition.mcp_servers)})")
    allowed = [pattern for pattern, rule in definition.approvals.items() if rule == "allow"]
    if allowed:
        found.append(f"approvals ({', '.join(f'{pattern!r}: allow' for pattern in allowed)})")
    if definition.sandbox is not None and wider_than_default(definition.sandbox, working_dir):
        profile = definition.sandbox
        found.append(f"sandbox ({profile.describe() if profile.enforced else 'off'})")
    return tuple(found)


def text_powers(kind: Literal["instructions", "skill"], name: str) -> tuple[str, ...]:
    """What a project's instructions or skill can do, as a person reads it."""
    if kind == "instructions":
        return ("instructions in every agent's system prompt",)
    return (f"skill {name!r} (its description in every agent's system prompt, its text when the model reads it)",)


@dataclass(frozen=True, kw_only=True)
class ProjectFile:
    """One agent type file of the project, or its instructions or a skill's `SKILL.md`, as read."""

    path: Path
    """The file."""
    text: str
    """Its text, exactly as parsed (the hash covers this text)."""
    name: str
    """The type's (or skill's) name."""
    definition: AgentType | None = None
    """The type it defines (None: instructions or a skill)."""
    powers: tuple[str, ...] = ()
    """Its fields with powers (`powers_of`); empty: it loads whether or not the folder is trusted."""
    kind: Literal["type", "instructions", "skill"] = "type"
    """What the file is."""


@dataclass(frozen=True, kw_only=True)
class ProjectPowers:
    """A folder's project files, those with powers among them, and whether the person trusts the folder."""

    folder: Path
    """The working folder (resolved)."""
    files: tuple[ProjectFile, ...] = ()
    """Every project agent type file, in the order they load."""
    store: Path | None = field(default=None, compare=False)
    """The file trust is remembered in; None: `trusted_folders_file()`."""

    @property
    def powerful(self) -> tuple[ProjectFile, ...]:
        """The files with powers: inert until the folder is trusted."""
        return tuple(file for file in self.files if file.powers)

    @property
    def digest(self) -> str:
        """A hash of the files with powers (their names and texts); '' when there are none."""
        if not self.powerful:
            return ""
        digest = hashlib.sha256()
        for file in sorted(self.powerful, key=self._key):
            for part in (self._key(file), file.text):
                data = part.encode("utf-8")
                digest.update(len(data).to_bytes(8, "big") + data)
        return "sha256:" + digest.hexdigest()

    def _key(self, file: ProjectFile) -> str:
        """A type file by its name (as trust was always remembered), instructions and skills by their path."""
        return file.path.name if file.kind == "type" else self._shown(file.path)

    def names(self) -> str:
        """The files with powers, as a person is told they are not used: `helper.md, AGENTS.md, .agents/…/SKILL.md`."""
        return ", ".join(self._key(file) for file in self.powerful)

    def lines(self) -> list[str]:
        """One line per file with powers: `.freeact-sub/agents/helper.md: hooks (PreToolUse), base_url (…)`."""
        return [self._line(file) for file in self.powerful]

    def _line(self, file: ProjectFile) -> str:
        return f"{self._shown(file.path)}: {', '.join(file.powers)}"

    def _shown(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.folder))
        except ValueError:
            return str(path)

    @property
    def remembered(self) -> str | None:
        """The hash the folder was trusted with, or None if it never was."""
        entry = _read(self._store()).get(str(self.folder))
        return entry.get("digest") if isinstance(entry, Mapping) else None

    @property
    def trusted(self) -> bool:
        """Whether the person trusts this folder with these very files (nothing to trust counts as trusted)."""
        return not self.powerful or self.remembered == self.digest

    def remember(self) -> Path:
        """Trust this folder with its files as they are now; returns the file trust is kept in."""
        path = self._store()
        entries = _read(path)
        entries[str(self.folder)] = {
            "digest": self.digest,
            "files": [self._shown(file.path) for file in self.powerful],
            "hashes": {self._key(file): _text_hash(file.text) for file in self.powerful},
            "trusted_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        _write(path, entries)
        return path

    def applies(self, trust_project: bool | None) -> bool:
        """Whether the files with powers are used: `trust_project` when given, else the remembered trust.

        None and an untrusted folder with powerful files: a `ConfigError` naming each file and field.
        """
        if trust_project is not None:
            return trust_project
        if self.trusted:
            return True
        raise ConfigError(self.question(for_program=True))

    @property
    def kinds(self) -> str:
        """What the files with powers are, in words: `agent types`, `instructions and skills`, or both."""
        types = any(file.kind == "type" for file in self.powerful)
        texts = [kind for kind in ("instructions", "skill") if any(file.kind == kind for file in self.powerful)]
        words = " and ".join({"instructions": "instructions", "skill": "skills"}[kind] for kind in texts)
        return ("agent types" + (f", {words}" if words else "")) if types else words

    def changes(self) -> tuple[list[ProjectFile], list[ProjectFile], list[str]]:
        """Since the folder was trusted: the files that changed (or, for trust remembered without a hash per
        file, may have), the files that are new, and the names of those no longer there."""
        entry = _read(self._store()).get(str(self.folder))
        entry = entry if isinstance(entry, Mapping) else {}
        hashes = entry.get("hashes") if isinstance(entry.get("hashes"), Mapping) else None
        before = list(hashes) if hashes is not None else [str(name) for name in entry.get("files") or []]
        name = self._key if hashes is not None else (lambda file: self._shown(file.path))  # as each was remembered
        now = {name(file): file for file in self.powerful}
        new = [file for key, file in now.items() if key not in before]
        if hashes is not None:
            changed = [file for key, file in now.items() if key in hashes and hashes[key] != _text_hash(file.text)]
        else:  # remembered by an older release: only the whole hash is known
            changed = [file for key, file in now.items() if key in before]
        return changed, new, [key for key in before if key not in now]

    def question(self, *, for_program: bool = False) -> str:
        """What the person is asked (or, `for_program`, told in a `ConfigError`): the folder, and each file that is
        new or changed since the folder was trusted with what it would do (every file, the first time)."""
        kinds = self.kinds
        doing = [*(["can run commands on your machine, approve their own actions or send your keys elsewhere"]
                   if "agent types" in kinds else []),
                 *(["go into every agent's instructions"] if kinds != "agent types" else [])]
        if self.remembered is None:
            head = f"This folder ({self.folder}) ships {kinds} that {' or '.join(doing)}:"
            lines = [head, *(f"  {line}" for line in self.lines())]
        else:
            changed, new, gone = self.changes()
            lines = [f"Files of {self.folder} changed since you trusted the folder:"]
            lines += [f"  changed: {self._line(file)}" for file in changed]
            lines += [f"  new: {self._line(file)}" for file in new]
            lines += [f"  removed: {name}" for name in gone]
            same = [self._shown(file.path) for file in self.powerful if file not in changed and file not in new]
            if same:
                lines.append(f"  unchanged: {', '.join(same)}")
        if for_program:
            lines.append("Pass Agent(..., trust_project=True) to use them, trust_project=False to run without them "
                         "(the rest still works), or trust the folder in the freeact-sub terminal or notebook.")
        return "\n".join(lines)

    def _store(self) -> Path:
        return self.store if self.store is not None else trusted_folders_file()


def trusted_folders(store: Path | None = None) -> dict[str, str]:
    """The folders the person trusts, each with the hash of its files with powers when it was trusted."""
    entries = _read(store or trusted_folders_file())
    return {folder: str(entry.get("digest", "")) for folder, entry in entries.items() if isinstance(entry, Mapping)}


def forget_folder(folder: Path | str, store: Path | None = None) -> bool:
    """Stop trusting `folder` (its files with powers are inert again); returns whether it was trusted."""
    path = store or trusted_folders_file()
    entries = _read(path)
    key = str(Path(folder).expanduser().resolve())
    if key not in entries:
        return False
    del entries[key]
    _write(path, entries)
    return True


def _text_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def project_powers(folder: Path, files: Iterable[ProjectFile], store: Path | None = None) -> ProjectPowers:
    """The `ProjectPowers` of `folder` (resolved) with these files."""
    return ProjectPowers(folder=folder.expanduser().resolve(), files=tuple(files), store=store)


def _read(path: Path) -> dict[str, Any]:
    """The folders in the trust file; none if it is missing. A file that is not ours is an error, never ignored."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the trusted folders: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc}); fix or delete it (no folder is then trusted)") from None
    folders = data.get("folders") if isinstance(data, dict) else None
    if not isinstance(folders, dict):
        raise ConfigError(f"{path}: expected {{\"folders\": {{...}}}}; fix or delete it (no folder is then trusted)")
    return folders


def _write(path: Path, entries: Mapping[str, Any]) -> None:
    """Replace the trust file at once (a temporary file renamed over it), readable by the person only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = json.dumps({"folders": dict(entries)}, indent=2, sort_keys=True) + "\n"
    handle, temporary = tempfile.mkstemp(prefix=".trusted-folders-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
