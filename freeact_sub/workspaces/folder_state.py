"""What the working folder holds, by path and file status, and what changed in it since the last look.

A checkpoint needs the files a turn changed, whoever changed them: the kernel's code, a subprocess, `pip`. So
the host looks at the folder itself, not at tools. Looking at every file's status costs about 10 µs a file (a
folder of 10,000 files: ~100 ms), too much before every turn; so the folder is also watched with inotify, which
the Linux kernel feeds for every write to a watched folder's files from any process, in any mount namespace.
A turn after which no event came costs one non-blocking read. Only the folders that events name are looked at
again; where inotify is missing or full (its queue overflowed, no watch left), the whole folder is.

Nothing here follows a link: folders are opened with `O_NOFOLLOW` from the folder before them, and a link is
recorded as a link.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from .below import DIR_FLAGS, split_path

__all__ = ["EXCLUDED", "MAX_PATHS", "REGENERABLE", "FolderState", "FolderTooLarge", "Record", "Status"]

Status = tuple[str, int, int, int, int, int]
"""A path's kind (`f` file, `l` link, `d` folder, `o` anything else), mode, size, mtime, inode, ctime (ns).
A folder's size and times are 0: they change with its entries, which are looked at one by one."""

Record = tuple[str, int, int, int, int, int, str]
"""A path as a checkpoint has it: its `Status`, then its content (a blob's hash, a link's target, or "")."""

MAX_PATHS = 200_000
"""The most files and folders a folder may hold for checkpoints: looking at more, before every turn where inotify
cannot say what changed, would cost seconds (about 10 µs a path)."""

EXCLUDED = frozenset({".freeact-sub"})
"""Top-level names never looked at: the host's own files (sessions, checkpoints) live there. `.env` files are
never looked at either, anywhere: their keys stay out of the checkpoints."""


REGENERABLE = frozenset({
    ".git", ".hg", ".svn", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".tox",
    ".nox", ".ipynb_checkpoints",
})
"""Folder names never looked at, at any depth, and neither is a virtual environment (a folder with `pyvenv.cfg`):
caches a tool rebuilds, and histories and environments of their own. The first checkpoint of a session copies
every file it looks at, and a project's `.venv` or `.git` alone can hold tens of thousands of files and hundreds
of megabytes; a version-control history is restored by its own tool, never by writing its files back."""


def _left_out(fd: int, entry: os.DirEntry[str]) -> bool:
    """`entry` (in the folder open as `fd`) is a folder that checkpoints leave out (`REGENERABLE`)."""
    if entry.name in REGENERABLE:
        return True
    try:
        if not entry.is_dir(follow_symlinks=False):
            return False
        os.stat(f"{entry.name}/pyvenv.cfg", dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    return True


class FolderTooLarge(Exception):
    """The folder holds more than checkpoints may look at or copy (`MAX_PATHS`, `checkpoint_limit`)."""


def _status(st: os.stat_result) -> Status:
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return ("d", stat.S_IMODE(mode), 0, 0, 0, 0)
    kind = "f" if stat.S_ISREG(mode) else "l" if stat.S_ISLNK(mode) else "o"
    return (kind, stat.S_IMODE(mode), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def _secret(name: str) -> bool:
    """A `.env` file: its keys are not copied into the checkpoints (the session's folder)."""
    return name == ".env" or name.startswith(".env.")


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


class _Watch:
    """inotify watches on every folder of the tree; `dirty()` names the folders whose entries changed."""

    MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800  # modify, attrib, close_write, moves,
    FLAGS = 0x01000000 | 0x02000000 | 0x04000000  # create, delete, self; only a folder, no link, not unlinked

    def __init__(self, root: Path) -> None:
        from inotify_simple import INotify

        self.root = root
        self.notify = INotify(nonblocking=True)
        self.folders: dict[int, str] = {}
        self.broken = False
        """True once a watch could not be added or the queue overflowed: the next look is at every folder."""

    def add(self, folder: str) -> None:
        if self.broken:
            return
        try:
            wd = self.notify.add_watch(self.root / folder if folder else self.root, self.MASK | self.FLAGS)
        except OSError:  # no watch left (max_user_watches), or the folder went meanwhile
            self.broken = True
            return
        self.folders[wd] = folder

    def dirty(self) -> set[str] | None:
        """The folders whose entries changed since the last call; None: unknown (look at all)."""
        found: set[str] = set()
        try:
            events = list(self.notify.read(timeout=0))
        except OSError:
            events, self.broken = [], True
        for event in events:
            if event.mask & 0x4000:  # the queue overflowed: events were lost
                self.broken = True
            elif event.mask & 0x8000:  # the watch is gone (its folder was removed)
                self.folders.pop(event.wd, None)
            elif (folder := self.folders.get(event.wd)) is not None:
                found.add(folder)
                if event.mask & (0x400 | 0x800):  # the folder itself went: its parent's entries changed
                    found.add(folder.rpartition("/")[0])
        if self.broken:
            return None
        return found

    def reset(self) -> None:
        for wd in list(self.folders):
            with contextlib.suppress(OSError):
                self.notify.rm_watch(wd)
        self.folders.clear()
        with contextlib.suppress(OSError):
            list(self.notify.read(timeout=0))
        self.broken = False

    def close(self) -> None:
        self.notify.close()


class FolderState:
    """The status of every path below `root` (but `EXCLUDED`) as last looked at, and the changes since."""

    def __init__(self, root: Path, *, watch: bool = True, max_bytes: int | None = None) -> None:
        """Look at `root` (watched with inotify if `watch` and the system has it). A whole look that finds more
        than `MAX_PATHS` paths, or files of more than `max_bytes`, stops there with `FolderTooLarge`."""
        self.root = Path(os.path.realpath(root))
        self.max_bytes = max_bytes
        self._counted = (0, 0)
        self.entries: dict[str, Status] = {}
        """Every path below the root (relative, `/`-separated) and its status when last looked at."""
        self._children: dict[str, set[str]] = {}
        self._watch: _Watch | None = None
        if watch:
            with contextlib.suppress(OSError, ImportError, AttributeError):  # no inotify on this system
                self._watch = _Watch(self.root)
        self._looked = False

    @property
    def watched(self) -> bool:
        """Whether changes are known from inotify (else every look reads every folder)."""
        return self._watch is not None and not self._watch.broken

    def look(self) -> dict[str, Status | None]:
        """Look at the folder again: what changed since the last look (None: it is gone). The first look
        returns every path."""
        if not self._looked or self._watch is None or (dirty := self._watch.dirty()) is None:
            return self._look_at_all()
        changed: dict[str, Status | None] = {}
        for folder in sorted(dirty, key=lambda f: f.count("/")):
            if folder and self.entries.get(folder, ("",))[0] != "d":
                continue  # reported, then gone or replaced: its parent's look takes care of it
            self._look_in(folder, changed)
        return changed

    def forget(self, paths: Iterable[str], now: dict[str, Status | None]) -> None:
        """Take `now` as the status of `paths` (the host itself just wrote them): the next look does not report
        them, unless they change again."""
        for path in paths:
            status = now.get(path)
            if status is None:
                self._drop_below(path, {}, keep_self=False)
            else:
                self._put(path, status)
        if self._watch is not None:
            self._watch.dirty()  # the host's own writes: already taken into account

    def close(self) -> None:
        """Stop watching."""
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def status_of(self, root_fd: int, path: str) -> Status | None:
        """The status of one path now (no link followed on the way), or None if it is not there."""
        fd = os.dup(root_fd)
        try:
            *folders, name = split_path(path)
            for part in folders:
                next_fd = os.open(part, DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = next_fd
            return _status(os.stat(name, dir_fd=fd, follow_symlinks=False))
        except OSError:
            return None
        finally:
            os.close(fd)

    # -- looking -------------------------------------------------------------------------------------

    def _look_at_all(self) -> dict[str, Status | None]:
        if self._watch is not None:
            self._watch.reset()
        before, self.entries, self._children = self.entries, {}, {}
        self._counted = (0, 0)
        try:
            self._look_in("", {}, recursive_all=True)
        except FolderTooLarge:
            self.entries, self._children = before, {}
            if self._watch is not None:
                self._watch.reset()
            raise
        self._looked = True
        changed: dict[str, Status | None] = {p: s for p, s in self.entries.items() if before.get(p) != s}
        changed.update({p: None for p in before if p not in self.entries})
        return changed

    def _open(self, folder: str) -> int:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        if not folder:
            return fd
        try:
            for part in folder.split("/"):
                next_fd = os.open(part, DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = next_fd
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _look_in(self, folder: str, changed: dict[str, Status | None], *, recursive_all: bool = False) -> None:
        """Look at `folder`'s entries; new folders below it are looked at whole (and watched)."""
        if self._watch is not None:
            self._watch.add(folder)  # before listing: a write after the listing is an event
        try:
            fd = self._open(folder)
        except OSError:
            self._drop_below(folder, changed, keep_self=False)
            return
        try:
            found: dict[str, Status] = {}
            with os.scandir(fd) as listing:
                for entry in listing:
                    if (not folder and entry.name in EXCLUDED) or _secret(entry.name) or _left_out(fd, entry):
                        continue
                    with contextlib.suppress(OSError):  # gone meanwhile
                        found[entry.name] = _status(entry.stat(follow_symlinks=False))
        finally:
            os.close(fd)
        for name in self._children.get(folder, set()) - found.keys():
            path = _join(folder, name)
            self._drop_below(path, changed, keep_self=False)
        for name, status in found.items():
            path = _join(folder, name)
            old = self.entries.get(path)
            if old is not None and old[0] == "d" and status[0] != "d":
                self._drop_below(path, changed, keep_self=True)
            if old != status:
                self._put(path, status)
                changed[path] = status
            if recursive_all:
                self._count(status)
            if status[0] == "d" and (recursive_all or old is None or old[0] != "d"):
                self._look_in(path, changed, recursive_all=recursive_all)

    def _count(self, status: Status) -> None:
        paths, held = self._counted
        paths, held = paths + 1, held + (status[2] if status[0] == "f" else 0)
        self._counted = (paths, held)
        if paths > MAX_PATHS:
            raise FolderTooLarge(
                f"the working folder holds more than {MAX_PATHS} files and folders, more than "
                "checkpoints look at before every turn"
            )
        if self.max_bytes is not None and held > self.max_bytes:
            raise FolderTooLarge(
                f"the working folder holds more than checkpoint_limit ({self.max_bytes} bytes) lets "
                "the checkpoints copy; raise checkpoint_limit to rewind in this folder"
            )

    def _put(self, path: str, status: Status) -> None:
        self.entries[path] = status
        folder, _, name = path.rpartition("/")
        self._children.setdefault(folder, set()).add(name)

    def _remove(self, path: str) -> None:
        if self.entries.pop(path, None) is not None:
            folder, _, name = path.rpartition("/")
            self._children.get(folder, set()).discard(name)

    def _drop_below(self, path: str, changed: dict[str, Status | None], *, keep_self: bool) -> None:
        """Forget what was below `path` (a folder that went or became a file), and `path` unless `keep_self`."""
        for name in list(self._children.pop(path, ())):
            self._drop_below(_join(path, name), changed, keep_self=False)
        if not keep_self and path in self.entries:
            self._remove(path)
            changed[path] = None
