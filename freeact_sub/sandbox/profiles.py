"""Sandbox profiles: what an agent's kernel may read, write and reach, and how a child's is derived.

A profile is written in terms a person uses (`~/.ssh`, `**/.env`, `.` for the working folder);
`plan()` turns it into absolute paths for one working folder, which `enforce.apply` confines a
process to.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import site
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from .enforce import platform_gaps
from .hosts import ANY_PUBLIC, NAMED_HOST_LISTS, expand_hosts, hosts_meet
from .limits import DEFAULT_LIMITS, Limits, limit_gaps, limits_meet

__all__ = [
    "ALWAYS_DENIED",
    "BUILT_IN_PROFILES",
    "DEFAULT_SECRETS",
    "KEPT_READ_ONLY",
    "SandboxProfile",
    "SandboxSetting",
    "meet",
    "profile_from",
]

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
    "~/.config/gh",
    "~/.config/hub",
    "~/.config/op",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.cargo/credentials.toml",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.codex",
    "~/.claude",
    "~/.claude.json",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.python_history",
    "**/.env",
    "**/.env.local",
    ".freeact-sub/agents",
    ".freeact-sub/sessions",
    ".freeact-sub/commands",
)
"""Paths no sandboxed kernel may read (nor change): keys, tokens and credentials, shell histories, this
project's user settings, and the project's agent types, commands and saved sessions (a kernel that could
write a type file could give a later agent more rights). `~` is the user's home; `**/NAME` is every NAME in
the working folder and below (hidden folders too, but not `.git` and virtual environments); a relative
path is relative to the working folder."""

ALWAYS_DENIED: tuple[str, ...] = ("~/.local/share/jupyter/runtime",)
"""Denied under every enforced profile, whatever its `read_deny`: Jupyter's runtime folder (the connection
files and keys of the notebook's own kernels, the servers' tokens), and `$JUPYTER_RUNTIME_DIR`. Every
kernel's and agent's private folder is hidden too (see `enforce`)."""

KEPT_READ_ONLY: tuple[str, ...] = (
    ".git",
    ".freeact-sub",
    ".vscode",
    ".idea",
    ".devcontainer",
    ".envrc",
    ".pre-commit-config.yaml",
    ".gitmodules",
    "AGENTS.md",
    ".agents",
)
"""Names (in the working folder and below) that a sandboxed kernel may read but never change, create in
their place, rename or remove, whatever the profile's `write` says: what git, the editors, direnv and
pre-commit run or read later on the person's own account, this project's own settings, and the instructions
and skills (`AGENTS.md`, `.agents/skills`) that go into an agent's system prompt. Virtual
environments (a folder with `pyvenv.cfg`), the host's Python (`sys.prefix`, `sys.base_prefix`, the user's
site-packages), every `.env*` file and the shell start-up files in each home are kept the same way."""

SHELL_FILES: tuple[str, ...] = (
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv", ".zprofile",
    ".zlogin", ".config/fish", ".inputrc", ".gitconfig", ".config/git", ".config/autostart", ".pythonrc",
    ".ipython", ".jupyter", ".config/freeact-sub", ".local/share/jupyter",
)
"""In each home: files a shell, git, Python or Jupyter reads and runs at its next start (kept read-only)."""

_LIMIT_FIELDS = ("memory", "processes", "cell_time")
_SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "site-packages", "dist", "build", ".git", ".hg",
                              ".tox", ".nox", ".mypy_cache", ".ruff_cache", ".pytest_cache"})
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
    network: bool | tuple[str, ...] = True
    """Whether the kernel may open network connections: `true` (the public internet), `false` (nowhere), or the hosts
    it may reach (`pypi.org`, `*.github.com` for its subdomains, `*` for any public host, an IP or network such as
    `10.0.0.0/8` or `127.0.0.1` to allow private or loopback addresses, `packages` for the Python package index's
    hosts). Every connection goes over HTTP(S) through the host's filtering proxy."""
    limits: Limits = DEFAULT_LIMITS
    """What the kernel may take: `memory` (per process), `processes`, `cell_time` (wall seconds per cell)."""
    unix_sockets: tuple[str, ...] = ()
    """Unix sockets (paths) the kernel may connect to, such as `/var/run/docker.sock`; none by default. Naming
    any lets the kernel make Unix sockets; every other socket bound to a path when it starts is then covered
    (one bound later is not: name none to refuse them all)."""
    enforced: bool = True
    """False only for `off`: the kernel runs with the user's full rights."""
    note: str = Field(default="", exclude=True)
    """Why this is `off` when no one asked for `off` (the platform cannot enforce a sandbox)."""

    @model_validator(mode="before")
    @classmethod
    def _limits_at_top(cls, value: Any) -> Any:
        """`memory`, `processes` and `cell_time` may be written in the profile itself, beside `network`."""
        if isinstance(value, dict) and (top := {key: value[key] for key in _LIMIT_FIELDS if key in value}):
            rest = {key: item for key, item in value.items() if key not in _LIMIT_FIELDS}
            limits = rest.get("limits", {})
            limits = limits.model_dump() if isinstance(limits, Limits) else dict(limits)
            return {**rest, "limits": {**limits, **top}}
        return value

    @field_validator("network", mode="before")
    @classmethod
    def _hosts(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in NAMED_HOST_LISTS:
            value = [value]
        if isinstance(value, (list, tuple)):
            return expand_hosts(value) or False  # no host: no network
        return value

    @property
    def hosts(self) -> tuple[str, ...] | None:
        """The hosts the kernel may reach through the proxy; None when `network` is all or nothing."""
        return self.network if isinstance(self.network, tuple) else None

    def network_text(self) -> str:
        """`network`, `no network` or `hosts: pypi.org, *.github.com`."""
        if self.hosts is not None:
            return "hosts: " + ", ".join(self.hosts)
        return "network" if self.network else "no network"

    def detail(self) -> str:
        """Hosts and limits, for events and panels: `hosts: pypi.org; memory 4 GiB, 256 processes`."""
        if not self.enforced:
            return ""
        return "; ".join(part for part in (self.network_text(), self.limits.describe()) if part)

    def describe(self) -> str:
        """One line for banners and panels: `workspace (writes: working folder; network; memory 4 GiB, …)`."""
        if not self.enforced:
            return "off (no sandbox: the user's full rights)"
        writes = ", ".join("working folder" if path == "." else path for path in self.write) or "its temp folder only"
        described = f"{self.name} (writes: {writes}; {self.detail()})"
        if gaps := [*platform_gaps(), *limit_gaps(self.limits)]:
            described += f"; not enforced on this machine: {', '.join(gaps)}"
        return described

    def writable_folders(self, working_dir: Path) -> list[str]:
        """The folders (real paths) a kernel under this profile may write, besides its own temp folder; `off`, which
        writes wherever the person can, gives the working folder (what the host's import guard watches)."""
        homes = _homes(())
        written = [path for pattern in self.write for path in _expand(pattern, working_dir, homes, must_exist=False)]
        return sorted({os.path.realpath(working_dir), *written})

    def plan(self, working_dir: Path, homes: Iterable[str] = ()) -> dict[str, Any]:
        """The profile for one working folder, as `enforce.apply` takes it (without the kernel's own folder)."""
        homes = _homes(homes)
        found = _ProjectWalk(working_dir, {pattern[3:] for pattern in (*self.read_deny, *self.write)
                                           if pattern.startswith("**/")})
        deny: list[str] = []
        for pattern in (*self.read_deny, *ALWAYS_DENIED):
            deny.extend(found.named(pattern[3:]) if pattern.startswith("**/") else _expand(pattern, working_dir, homes))
        if runtime := os.environ.get("JUPYTER_RUNTIME_DIR"):
            deny.extend(_expand(runtime, working_dir, homes))
        write = [path for pattern in self.write for path in _expand(pattern, working_dir, homes, must_exist=False)]
        kept = [*found.kept, *_interpreter_folders()]
        kept += [path for home in homes for name in SHELL_FILES if os.path.lexists(path := os.path.join(home, name))]
        # only what a write rule reaches needs the mount (Landlock refuses the rest); covered secrets stay covered
        denied = set(deny)
        read_only = {os.path.realpath(path) for path in kept if any(_within(os.path.realpath(path), w) for w in write)}
        sockets = [path for pattern in self.unix_sockets for path in _expand(pattern, working_dir, homes)]
        # `true` is the public internet through the proxy (a network namespace of its own): never the host's loopback,
        # link-local or private ranges
        network: bool | list[str] = list(self.network) if isinstance(self.network, tuple) else \
            [ANY_PUBLIC] if self.network else False
        return {"deny": sorted(set(deny)), "reveal": _skills_shown(deny, homes),
                "read_only": sorted(read_only - denied), "write": sorted(set(write)),
                "network": network, "unix_sockets": sorted(set(sockets)), "limits": self.limits.plan(),
                "profile": self.name}


BUILT_IN_PROFILES: dict[str, SandboxProfile] = {
    "workspace": SandboxProfile(name="workspace"),
    "offline": SandboxProfile(name="offline", network=False),
    "read-only": SandboxProfile(name="read-only", write=(), network=False),
    "off": SandboxProfile(name="off", read_deny=(), write=(), enforced=False),
    "packages": SandboxProfile(name="packages", network=("packages",)),
}
"""`workspace` (the default): read all but secrets, write the working folder, network.
`offline`: the same without network. `packages`: the same, reaching only the Python package index (pip works).
`read-only`: no writes but its temp folder, no network.
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

    Network only if both allow it (hosts only those both allow), writes only where both allow them, each limit the
    smaller of the two, Unix sockets only those both name,
    every path either denies stays denied. A child of an unsandboxed parent gets what it asks for; a child asking for
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
    network = hosts_meet(parent.network, child.network)
    sockets = tuple(path for path in child.unix_sockets if path in parent.unix_sockets)
    limits = limits_meet(parent.limits, child.limits)
    for candidate in (child, parent):
        same = set(candidate.read_deny) == set(deny) and set(candidate.write) == set(writes)
        if same and candidate.network == network and set(candidate.unix_sockets) == set(sockets) \
                and candidate.limits == limits:
            return candidate
    return SandboxProfile(name=f"{child.name} within {parent.name}", read_deny=deny, write=tuple(writes),
                          network=network, unix_sockets=sockets, limits=limits)


def _skills_shown(deny: list[str], homes: list[str]) -> dict[str, list[str]]:
    """The person's skills folder (`~/.config/freeact-sub/skills`), readable where the folder it is in is denied:
    `{"…/.config/freeact-sub": ["…/skills"]}`, unless a profile denies the skills themselves (or something in them)."""
    shown: dict[str, list[str]] = {}
    for home in homes:
        root = os.path.realpath(os.path.join(home, ".config", "freeact-sub"))
        skills = os.path.join(root, "skills")
        if root in deny and os.path.isdir(skills) and not os.path.islink(skills) \
                and not any(_within(path, skills) for path in deny):
            shown.setdefault(root, []).append(skills)
    return {root: sorted(set(paths)) for root, paths in shown.items()}


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
        return _ProjectWalk(working_dir, {pattern[3:]}).named(pattern[3:])
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


class _ProjectWalk:
    """One bounded walk of the working folder: every `**/NAME` asked for, and what is kept read-only.

    It enters hidden folders (a `.devcontainer/.env` is a secret too) but not `.git`, virtual environments
    or package folders.
    """

    def __init__(self, root: Path, wanted: set[str]) -> None:
        self.kept: list[str] = []
        self._names: dict[str, list[str]] = {name: [] for name in wanted}
        # One scandir a folder, top-down, depth first: the entries' types come with the listing, where os.walk
        # would also lstat every subfolder to leave links alone (a third of its time on 20,000 folders).
        stack = [os.fspath(root)]
        walked = 0
        while stack and walked < _MAX_FOLDERS_WALKED:
            folder = stack.pop()
            walked += 1
            try:
                with os.scandir(folder) as listing:
                    entries = list(listing)
            except OSError:
                continue
            subfolders: list[str] = []
            environment = False
            for entry in entries:
                name = entry.name
                if name in self._names:
                    self._names[name].append(entry.path)
                if name in KEPT_READ_ONLY or name.startswith(".env"):
                    self.kept.append(entry.path)
                try:
                    is_folder = entry.is_dir(follow_symlinks=False)  # a link is never entered
                except OSError:
                    is_folder = False
                if is_folder:
                    if name not in _SKIPPED_FOLDERS:
                        subfolders.append(entry.path)
                elif name == "pyvenv.cfg":
                    environment = True
            if environment:
                self.kept.append(folder)
            else:
                stack.extend(reversed(subfolders))

    def named(self, name: str) -> list[str]:
        """Every `name` found in the working folder and below."""
        return [os.path.realpath(path) for path in self._names.get(name, ())]


def _interpreter_folders() -> list[str]:
    """The host's Python: a kernel that could write a `.pth` file there would run code in the host's next start."""
    folders = {sys.prefix, sys.base_prefix}
    with contextlib.suppress(Exception):
        folders.add(site.getusersitepackages())
    return [folder for folder in folders if os.path.isdir(folder)]
