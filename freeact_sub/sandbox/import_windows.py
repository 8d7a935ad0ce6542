"""When an agent's kernel could write a folder: the windows the host's import guard checks files against.

A kernel's writes carry nothing that says who made them (the kernel runs as the person), but every write,
rename, link or `utime` sets the file's change time (`st_ctime`) to the clock's time, and no unprivileged
process can set it back. So a file whose change time falls inside a window, from an agent's start to its
stop, in a folder its kernel could write, may have been written by that kernel. The windows are kept in
`<working folder>/.freeact-sub/import-guard.json`, which a sandboxed kernel can read but not change (the
folder is kept read-only), so a later process (the notebook after a restart, the next run of a program)
still knows them, together with the files the person trusted (by the hash of their content).

A window whose process died without closing it is closed when a later process first sees it dead: that is
later than its kernels' last write, never earlier.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["MARGIN_NS", "STORE", "GuardStore", "Window"]

STORE = ".freeact-sub/import-guard.json"
"""Where, inside a working folder, its windows and the trusted files' hashes are kept."""
MARGIN_NS = 2_000_000_000
"""Change times are taken from a coarse clock (a tick behind), and a network file system's from its server's:
a file changed up to this long before a window opened (or after it closed) counts as changed inside it."""


@dataclass(frozen=True, kw_only=True)
class Window:
    """A time when an agent's kernel could write `roots`."""

    roots: tuple[str, ...]
    """The folders (real paths) its kernels could write."""
    start: int
    """When it opened (`time.time_ns()`), before the first kernel started."""
    end: int | None = None
    """When it closed, after the last kernel stopped; None while open."""
    pid: int = 0
    """The host process that opened it, and that process's start (to tell a reused pid)."""
    started: str = ""

    def covers(self, path: str) -> bool:
        """Whether `path` (absolute) lies in one of its folders."""
        return any(_within(path, root) for root in self.roots)

    def holds(self, ctime_ns: int) -> bool:
        """Whether a change at `ctime_ns` may have been a kernel's."""
        return self.start - MARGIN_NS <= ctime_ns and (self.end is None or ctime_ns <= self.end + MARGIN_NS)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _process_start(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


@dataclass(kw_only=True)
class GuardStore:
    """One working folder's windows and trusted files, read from and written to its store file."""

    folder: str
    """The working folder (real path)."""
    windows: list[Window] = field(default_factory=list)
    trusted: dict[str, str] = field(default_factory=dict)
    """Real path of a file the person trusted → the sha256 of the content trusted."""
    read_at: tuple[int, int] | None = None
    _index: dict[str, list[Window]] = field(default_factory=dict, repr=False)
    _indexed: list[Window] | None = field(default=None, repr=False)

    @property
    def path(self) -> str:
        return os.path.join(self.folder, STORE)

    def may_cover(self, path: str) -> bool:
        """Whether `path` lies in this folder or in a folder one of its windows (as last read) covers."""
        return _within(path, self.folder) or any(_within(path, root) for root in self._by_root())

    def windows_over(self, *paths: str) -> list[Window]:
        """The windows whose folders hold one of `paths` (absolute)."""
        return [
            window
            for root, windows in self._by_root().items()
            if any(_within(path, root) for path in paths)
            for window in windows
        ]

    def _by_root(self) -> dict[str, list[Window]]:
        if self._indexed is not self.windows:
            self._index = {}
            for window in self.windows:
                for root in window.roots:
                    self._index.setdefault(root, []).append(window)
            self._indexed = self.windows
        return self._index

    def refresh(self) -> None:
        """Read the store again if it changed since it was last read (another process may have opened a window)."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return
        if self.read_at != (stat.st_mtime_ns, stat.st_size):
            with self._locked() as data:
                self._take(data)
            self.read_at = (stat.st_mtime_ns, stat.st_size)

    def open_window(self, roots: list[str]) -> Window:
        """Open a window for `roots` now, kept in memory if the store cannot be written (a read-only folder)."""
        window = Window(roots=tuple(roots), start=time.time_ns(), pid=os.getpid(), started=_process_start(os.getpid()))
        self._change(lambda data: data["windows"].append(_window_data(window)), fallback=window)
        return window

    def close_window(self, window: Window) -> None:
        """Close `window` now."""
        closed = replace(window, end=time.time_ns())

        def close(data: dict[str, Any]) -> None:
            data["windows"] = [_window_data(closed) if _same(entry, window) else entry for entry in data["windows"]]

        self._change(close)
        self.windows = [closed if other == window else other for other in self.windows]

    def trust(self, path: str, digest: str) -> None:
        """Trust the file at `path` (real) with the content of hash `digest`."""
        self.trusted[path] = digest
        self._change(lambda data: data["trusted"].__setitem__(path, digest))

    def _change(self, change: Any, fallback: Window | None = None) -> None:
        try:
            with self._locked(write=True) as data:
                change(data)
                self._take(data)
        except OSError:
            if fallback is not None:
                self.windows = [*self.windows, fallback]

    @contextlib.contextmanager
    def _locked(self, write: bool = False) -> Iterator[dict[str, Any]]:
        if write:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
        try:
            descriptor = os.open(
                self.path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT if write else 0), 0o644
            )
            writable = True
        except OSError:
            if write:
                raise
            descriptor, writable = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), False
        with os.fdopen(descriptor, "r+" if writable else "r", encoding="utf-8") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            data = _parsed(file.read())
            dead = _close_dead(data)  # kept, so that its end does not move on with each reading
            yield data
            if writable and (write or dead):
                file.seek(0)
                file.truncate()
                file.write(json.dumps(data, indent=1))

    def _take(self, data: dict[str, Any]) -> None:
        now = time.time_ns()
        windows = []
        for entry in data["windows"]:
            window = _window(entry)
            if window is None:
                continue
            if window.end is None and window.pid != os.getpid() and not _alive(window):
                window = replace(window, end=now)  # its process is gone: not one write of its kernels came later
            windows.append(window)
        self.windows = windows + [
            window
            for window in self.windows
            if window.pid == os.getpid() and not any(_same(entry, window) for entry in data["windows"])
        ]
        self.trusted.update({str(key): str(value) for key, value in data["trusted"].items()})


def _alive(window: Window) -> bool:
    return _process_start(window.pid) == window.started and window.started != ""


def _close_dead(data: dict[str, Any]) -> bool:
    changed = False
    for entry in data["windows"]:
        window = _window(entry)
        if window is not None and window.end is None and window.pid != os.getpid() and not _alive(window):
            entry["end"], changed = time.time_ns(), True
    return changed


def _parsed(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError:
        data = {}
    data = data if isinstance(data, dict) else {}
    windows, trusted = data.get("windows"), data.get("trusted")
    return {
        "windows": windows if isinstance(windows, list) else [],
        "trusted": trusted if isinstance(trusted, dict) else {},
    }


def _window_data(window: Window) -> dict[str, Any]:
    return {
        "roots": list(window.roots),
        "start": window.start,
        "end": window.end,
        "pid": window.pid,
        "started": window.started,
    }


def _window(entry: Any) -> Window | None:
    try:
        return Window(
            roots=tuple(str(root) for root in entry["roots"]),
            start=int(entry["start"]),
            end=None if entry.get("end") is None else int(entry["end"]),
            pid=int(entry.get("pid", 0)),
            started=str(entry.get("started", "")),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _same(entry: dict[str, Any], window: Window) -> bool:
    return entry.get("start") == window.start and entry.get("pid") == window.pid
