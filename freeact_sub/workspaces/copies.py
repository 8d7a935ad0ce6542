"""A child's private copy of the working folder, where a copy-on-write view cannot be had, and its change set.

`copy_folder` copies the folder into a host-made folder (no link followed: a link is copied as a link, a FIFO,
socket or device is left out) and returns a `Manifest`: each copied path's kind, inode and ctime as made. The
child's kernel works in the copy. When it ends, `read_copy_changes` walks the copy and looks closer only at what
is not as it was made (a write changes the ctime, which no program can set back): those are compared with the
folder as it is now, exactly as the upper layer of a view is (`changes.py`), so applying is the same either way.

Left out of the copy, and out of the change set: the host's own `.freeact-sub` (sessions, checkpoints) and the
caches a tool rebuilds unasked (`CACHES`). Version-control histories, virtual environments and `node_modules`
are copied: the child's code runs with them (`import` from `.venv`, `git diff`), and leaving them out would change
what that code does without saying so.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from .changes import ChangeSet, FileChange, file_change, lstat_in

__all__ = ["CACHES", "FolderTooLargeToCopy", "Manifest", "copy_folder", "read_copy_changes"]

CACHES = frozenset({"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".ipynb_checkpoints"})
"""Folder names left out of a copy at any depth (and what a child writes in them is no change): caches their
tools rebuild when missing, never a source of truth."""
TOP_LEFT_OUT = frozenset({".freeact-sub"})
"""Top-level names left out: the host's own files."""

Manifest = dict[str, tuple[str, int, int]]
"""Each path of a copy as it was made: its kind (`f` file, `l` link, `d` folder), inode and ctime (ns)."""

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20


class FolderTooLargeToCopy(Exception):
    """The folder holds more than `isolation_copy_limit` bytes: no private copy is made."""


def _kind(mode: int) -> str | None:
    return "d" if stat.S_ISDIR(mode) else "f" if stat.S_ISREG(mode) else "l" if stat.S_ISLNK(mode) else None


def _entries(dir_fd: int, prefix: str) -> Iterator[tuple[str, str, os.stat_result, int]]:
    """(relative path, name, lstat, the fd of its folder) of every file, link and folder beneath `dir_fd`, parents
    first, without following a link, leaving out `CACHES` (and `TOP_LEFT_OUT` at the top)."""
    with os.scandir(dir_fd) as found:
        entries = sorted(found, key=lambda entry: entry.name)
    for entry in entries:
        if entry.name in CACHES or (not prefix and entry.name in TOP_LEFT_OUT):
            continue
        info = entry.stat(follow_symlinks=False)
        relative = f"{prefix}/{entry.name}" if prefix else entry.name
        yield relative, entry.name, info, dir_fd
        if stat.S_ISDIR(info.st_mode):
            fd = os.open(entry.name, _DIR, dir_fd=dir_fd)
            try:
                yield from _entries(fd, relative)
            finally:
                os.close(fd)


def _measure(source: Path, limit: int) -> None:
    fd = os.open(source, _DIR)
    try:
        total = 0
        for _, _, info, _ in _entries(fd, ""):
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
            if total > limit:
                raise FolderTooLargeToCopy(
                    f"the working folder holds more than isolation_copy_limit ({limit:,} bytes), too much to copy "
                    "for a child (set isolation_copy_limit higher, or start the child without isolation)"
                )
    finally:
        os.close(fd)


def copy_folder(source: Path, target: Path, limit: int) -> Manifest:
    """Copy `source` into `target` (a new, empty folder of the host's); `FolderTooLargeToCopy` (nothing copied)
    when its files hold more than `limit` bytes. Returns what was made."""
    _measure(source, limit)
    manifest: Manifest = {}
    source_fd, target_fd = os.open(source, _DIR), os.open(target, _DIR)
    folders: dict[str, int] = {"": target_fd}
    try:
        for relative, name, info, dir_fd in _entries(source_fd, ""):
            parent = folders.get(relative.rpartition("/")[0])
            if parent is None:  # its folder could not be made
                continue
            kind = _kind(info.st_mode)
            try:
                if kind == "d":
                    os.mkdir(name, stat.S_IMODE(info.st_mode) | 0o700, dir_fd=parent)
                    folders[relative] = os.open(name, _DIR, dir_fd=parent)
                elif kind == "l":
                    os.symlink(os.readlink(name, dir_fd=dir_fd), name, dir_fd=parent)
                elif kind == "f":
                    _copy_file(dir_fd, name, parent, info)
                else:
                    continue  # a FIFO, socket or device is no file to work on
            except FileNotFoundError:
                continue  # gone while it was copied
            made = os.stat(name, dir_fd=parent, follow_symlinks=False)
            manifest[relative] = (kind, made.st_ino, made.st_ctime_ns)
    finally:
        os.close(source_fd)
        for fd in folders.values():
            os.close(fd)
    return manifest


def _copy_file(dir_fd: int, name: str, parent: int, info: os.stat_result) -> None:
    src = os.open(name, _READ, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):
            return
        dst = os.open(
            name,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            stat.S_IMODE(info.st_mode) & 0o777,
            dir_fd=parent,
        )
        try:
            _copy_bytes(src, dst)
            os.utime(dst, ns=(info.st_atime_ns, info.st_mtime_ns))  # tools that compare times see the folder's
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_bytes(src: int, dst: int) -> None:
    try:
        while os.copy_file_range(src, dst, _CHUNK):  # in the kernel (a reflink where the file system has them)
            pass
    except OSError:  # another file system, or no copy_file_range: by hand, from where it stopped
        while chunk := os.read(src, _CHUNK):
            os.write(dst, chunk)


def read_copy_changes(
    copy: Path, folder: Path, manifest: Manifest, *, agent_id: str = "", started_ns: int = 0
) -> ChangeSet:
    """The change set of a child that worked in `copy` (made by `copy_folder` as `manifest`), diffs against
    `folder` as it is now. Read once the child's kernel has stopped; what is in the copy is hostile input."""
    found = ChangeSet(agent_id=agent_id, folder=folder, upper=copy, started_ns=started_ns)
    now: dict[str, str | None] = {}
    root = os.open(copy, _DIR)
    try:
        for relative, name, info, dir_fd in _entries(root, ""):
            kind = now[relative] = _kind(info.st_mode)
            if kind == "d" or manifest.get(relative) == (kind, info.st_ino, info.st_ctime_ns):
                continue  # a folder (its files speak for it), or untouched
            lower = lstat_in(folder, relative)
            if kind == "l":
                target = os.readlink(name, dir_fd=dir_fd)
                if lower is not None and stat.S_ISLNK(lower.st_mode) and os.readlink(folder / relative) == target:
                    continue
                found.changes.append(FileChange(path=relative, kind="changed" if lower else "added", link=target))
            elif kind == "f":
                if (change := file_change(copy, folder, relative, info, lower)) is not None:
                    found.changes.append(change)
            else:
                found.skipped.append(relative)
    finally:
        os.close(root)
    for relative, (kind, _, _) in manifest.items():
        current = now.get(relative)
        if current == kind or (kind != "d" and current in ("f", "l")):
            continue  # still there (a file that became a link, or back, is a change the walk found)
        lower = lstat_in(folder, relative)
        if lower is None:
            continue  # gone from the folder too
        if kind == "d":
            if stat.S_ISDIR(lower.st_mode):
                found.removed_folders.append(relative)
        elif not stat.S_ISDIR(lower.st_mode):
            found.changes.append(FileChange(path=relative, kind="removed"))
    found.changes.sort(key=lambda change: change.path)
    return found
