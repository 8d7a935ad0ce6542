"""Sandbox profiles: what an agent's kernel may read, write and reach, and how a child's is derived.

A profile is written in terms a person uses (`~/.ssh`, `**/.env`, `.` for the working folder);
`plan()` turns it into absolute paths for one working folder, which `enforce.apply` confines a
process to.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

__all__ = ["BUILT_IN_PROFILES", "DEFAULT_SECRETS", "SandboxProfile", "SandboxSetting", "meet", "profile_from"]

DEFAULT_SECRETS: tuple[str, ...] = (
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.pypirc",
    "~/.npmrc",
    "~/.config/freeact-sub",
    "**/.env",
    "**/.env.local",
    ".freeact-sub/agents",
    ".freeact-sub/sessions",
)
"""Paths no sandboxed kernel may read (nor change): keys and credentials, this project's user
settings, and the project's agent types and saved sessions (a kernel that could write a type
file could give a later agent more rights). `~` is the user's home; `**/NAME` is every NAME in the
working folder and below; a relative path is relative to the working folder."""

_SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "site-packages", "dist", "build"})
_MAX_FOLDERS_WALKED = 20_000


class SandboxProfile(BaseModel):
    """What an agent's kernel may touch. The built-in ones are in `BUILT_IN_PROFILES`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "custom"
    """How banners and events name it."""
    read_deny: tuple[str, ...] = DEFAULT_SECRETS
    """Paths that cannot be read (nor written): `~/…`, `**/NAME`, absolute, or relative to the working folder."""
    write: tuple[str, ...] = (".",)
    """Folders that may be written (`.` is the working folder); the kernel's own temp folder always may."""
    network: bool = True
    """Whether the kernel may open network connections (TCP, UDP, anything but its own channels)."""
    enforced: bool = True
    """False only for `off`: the kernel runs with the user's full rights."""
    note: str = Field(default="", exclude=True)
    """Why this is `off` when no one asked for `off` (the platform cannot enforce a sandbox)."""

    def describe(self) -> str:
        """One line for banners and panels: `workspace (writes: working folder; network)`."""
        if not self.enforced:
            return "off (no sandbox: the user's full rights)"
        writes = ", ".join("working folder" if path == "." else path for path in self.write) or "its temp folder only"
        return f"{self.name} (writes: {writes}; {'network' if self.network else 'no network'})"

    def plan(self, working_dir: Path, homes: Iterable[str] = ()) -> dict[str, Any]:
        """The profile for one working folder, as `enforce.apply` takes it (without the kernel's own folder)."""
        homes = _homes(homes)
        deny: list[str] = []
        for pattern in self.read_deny:
            deny.extend(_expand(pattern, working_dir, homes))
        write = [path for pattern in self.write for path in _expand(pattern, working_dir, homes, must_exist=False)]
        return {"deny": sorted(set(deny)), "write": sorted(set(write)), "network": self.network}


BUILT_IN_PROFILES: dict[str, SandboxProfile] = {
    "workspace": SandboxProfile(name="workspace"),
    "offline": SandboxProfile(name="offline", network=False),
    "read-only": SandboxProfile(name="read-only", write=(), network=False),
    "off": SandboxProfile(name="off", read_deny=(), write=(), enforced=False),
}
"""`workspace` (the default): read all but secrets, write the working folder, network.
`offline`: the same without network. `read-only`: no writes but its temp folder, no network.
`off`: no sandbox."""


def profile_from(value: Any) -> SandboxProfile:
    """A profile from a config value: a built-in name, a dict of fields, or a profile."""
    if isinstance(value, SandboxProfile):
        return value
    if isinstance(value, str):
        if value not in BUILT_IN_PROFILES:
            raise ValueError(f"unknown sandbox profile {value!r}; the profiles are {', '.join(BUILT_IN_PROFILES)}, "
                             "or a table with read_deny, write and network")
        return BUILT_IN_PROFILES[value]
    if isinstance(value, dict):
        return SandboxProfile.model_validate(value)
    raise ValueError(f"a sandbox profile is a name or a table, not {type(value).__name__}")


def _setting(value: Any) -> SandboxProfile | None:
    return None if value is None else profile_from(value)


SandboxSetting = Annotated[SandboxProfile | None, BeforeValidator(_setting)]
"""A config field holding a sandbox profile: a built-in name, a table, a profile, or None."""


def meet(parent: SandboxProfile, child: SandboxProfile, working_dir: Path) -> SandboxProfile:
    """The profile a child runs under: what its type asks for, never more than its parent has.

    Network only if both allow it, writes only where both allow them, every path either denies
    stays denied. A child of an unsandboxed parent gets what it asks for; a child asking for
    `off` under a sandboxed parent gets its parent's profile.
    """
    if not parent.enforced:
        return child
    if not child.enforced:
        return parent
    parent_writes = {pattern: _absolute(pattern, working_dir) for pattern in parent.write}
    child_writes = {pattern: _absolute(pattern, working_dir) for pattern in child.write}
    writes: list[str] = []
    for pattern, path in child_writes.items():
        if any(_within(path, other) for other in parent_writes.values()):
            writes.append(pattern)
    for pattern, path in parent_writes.items():
        if pattern not in writes and any(_within(path, other) for other in child_writes.values()):
            writes.append(pattern)
    deny = tuple(dict.fromkeys([*parent.read_deny, *child.read_deny]))
    network = parent.network and child.network
    for candidate in (child, parent):
        same = set(candidate.read_deny) == set(deny) and set(candidate.write) == set(writes)
        if same and candidate.network == network:
            return candidate
    return SandboxProfile(name=f"{child.name} within {parent.name}", read_deny=deny, write=tuple(writes),
                          network=network)


def _homes(extra: Iterable[str]) -> list[str]:
    homes = [home for home in extra if home]
    try:
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        pass
    if home := os.environ.get("HOME"):
        homes.append(home)
    return list(dict.fromkeys(homes))


def _absolute(pattern: str, working_dir: Path) -> str:
    if pattern.startswith("~"):
        return os.path.realpath(os.path.expanduser(pattern))
    return os.path.realpath(working_dir / pattern)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _expand(pattern: str, working_dir: Path, homes: list[str], *, must_exist: bool = True) -> list[str]:
    if pattern.startswith("**/"):
        return _found_below(working_dir, pattern[3:])
    if pattern == "~" or pattern.startswith("~/"):
        candidates = [os.path.join(home, pattern[2:]) for home in homes]
    else:
        candidates = [os.path.join(working_dir, pattern)]
    found = []
    for candidate in candidates:
        if must_exist and not os.path.lexists(candidate):
            continue
        found.append(os.path.realpath(candidate))
    return found


def _found_below(root: Path, name: str) -> list[str]:
    """Every `name` in `root` and the folders below it (not in hidden or package folders; bounded)."""
    found: list[str] = []
    walked = 0
    for folder, subfolders, files in os.walk(root):
        walked += 1
        if name in files or name in subfolders:
            found.append(os.path.realpath(os.path.join(folder, name)))
        subfolders[:] = [sub for sub in subfolders if not sub.startswith(".") and sub not in _SKIPPED_FOLDERS]
        if walked >= _MAX_FOLDERS_WALKED:
            break
    return found
