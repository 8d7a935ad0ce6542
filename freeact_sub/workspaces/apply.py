"""Apply a change set to the working folder: never through a link, never a blind overwrite.

Each file is reached from the folder by `openat`, one part at a time, refusing links (`O_NOFOLLOW`): a link in the
way is an error for that file, not a path followed out of the folder. A new version is written beside its place
and renamed over it. A file that changed in the folder after the child started is a conflict: text whose edits do
not overlap is merged three ways (the base from the `Journal`), and where both only added lines at the same
place both additions are kept (the folder's first); anything else keeps the folder's version and saves the
child's next to it (`name.<agent id>.ext`), named in the report.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import merge3

from .below import DIR_FLAGS, parent_of, put_in_place
from .changes import TEXT_LIMIT, ChangeSet, FileChange
from .folder import now_ns
from .journal import Journal

__all__ = ["AppliedFile", "ApplyReport", "apply_changes", "mark_conflicts"]

Outcome = Literal["applied", "merged", "kept", "skipped", "failed"]
_CHUNK = 1 << 16


@dataclass(kw_only=True)
class AppliedFile:
    """What became of one file of the set."""

    path: str
    outcome: Outcome
    """`applied` (the child's version), `merged` (both sides' edits), `kept` (the folder's version, a conflict:
    the child's is at `saved_as`), `skipped` (not chosen), `failed` (see `note`)."""
    saved_as: str | None = None
    note: str = ""

    def line(self) -> str:
        """One line for the model and the person."""
        text = f"{self.path}: {self.outcome}"
        if self.saved_as:
            text += f" (the subagent's version is saved as {self.saved_as})"
        return text + (f" — {self.note}" if self.note else "")


@dataclass(kw_only=True)
class ApplyReport:
    """What applying a change set did, file by file."""

    files: list[AppliedFile] = field(default_factory=list)

    def text(self) -> str:
        """One line per file."""
        return "\n".join(f.line() for f in self.files)

    def by_outcome(self, outcome: Outcome) -> list[AppliedFile]:
        """The files with this outcome."""
        return [f for f in self.files if f.outcome == outcome]


def mark_conflicts(changes: ChangeSet) -> None:
    """Set each change's `conflict` where the folder's file changed (or came or went) after the child started."""
    root = os.open(changes.folder, DIR_FLAGS)
    try:
        for change in changes.changes:
            try:
                with parent_of(root, change.path, make=False) as (dir_fd, name):
                    current = _lstat(dir_fd, name)
            except FileNotFoundError:
                current = None
            except OSError:
                change.conflict = "a link or file is in the way of its folder"
                continue
            if change.kind == "added" and current is not None:
                change.conflict = "a file of that name was made in the folder meanwhile"
            elif change.kind != "added" and current is None:
                change.conflict = "it was removed from the folder meanwhile"
            elif current is not None and current.st_ctime_ns >= changes.started_ns:
                change.conflict = "it changed in the folder too since the subagent started"
    finally:
        os.close(root)


def apply_changes(changes: ChangeSet, journal: Journal | None = None) -> ApplyReport:
    """Apply the files of `changes` whose `apply` is set (the rest are `skipped`); see the module's docstring."""
    journal = journal if journal is not None else Journal()
    with journal.applying:  # one set at a time: each sees what the one before it wrote
        return _apply_all(changes, journal)


def _apply_all(changes: ChangeSet, journal: Journal) -> ApplyReport:
    report = ApplyReport()
    root = os.open(changes.folder, DIR_FLAGS)
    try:
        for change in changes.changes:
            if not change.apply:
                report.files.append(AppliedFile(path=change.path, outcome="skipped", note="not chosen"))
                continue
            try:
                report.files.append(_apply_one(root, changes, change, journal))
            except OSError as exc:
                why = "a link is in the way (not followed)" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else str(exc)
                report.files.append(AppliedFile(path=change.path, outcome="failed", note=why))
        for folder in sorted(changes.removed_folders, key=lambda path: -path.count("/")):
            with contextlib.suppress(OSError):  # a folder with anything left in it stays
                with parent_of(root, folder, make=False) as (dir_fd, name):
                    os.rmdir(name, dir_fd=dir_fd)
    finally:
        os.close(root)
    return report


def _lstat(fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _read(name: str, dir_fd: int, limit: int | None = None) -> bytes:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    try:
        chunks = []
        total = 0
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
            total += len(chunk)
            if limit is not None and total > limit:
                break
        return b"".join(chunks)
    finally:
        os.close(fd)


def _upper_version(changes: ChangeSet, change: FileChange) -> tuple[int, str]:
    """The folder in the upper layer that holds the child's version, and its name there."""
    parent_fd = os.open(changes.upper, DIR_FLAGS)
    try:
        with parent_of(parent_fd, change.path, make=False) as (fd, name):
            return os.dup(fd), name
    finally:
        os.close(parent_fd)


def _write_from(source_fd: int, source: str, dir_fd: int, name: str, link: str | None) -> None:
    """Put the child's version at `name` in `dir_fd`: written beside it, then renamed over it (a link is replaced,
    not followed)."""
    temporary = f".{name}.freeact-sub-{os.getpid()}-{time.monotonic_ns()}"[:255]
    if link is not None:
        os.symlink(link, temporary, dir_fd=dir_fd)
    else:
        mode = stat.S_IMODE(os.stat(source, dir_fd=source_fd, follow_symlinks=False).st_mode) & 0o777
        src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=source_fd)
        try:
            dst = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                          dir_fd=dir_fd)
            try:
                while chunk := os.read(src, _CHUNK):
                    os.write(dst, chunk)
            finally:
                os.close(dst)
        finally:
            os.close(src)
    put_in_place(temporary, name, dir_fd)


def _write_bytes(data: bytes, dir_fd: int, name: str, mode: int = 0o644) -> None:
    temporary = f".{name}.freeact-sub-{os.getpid()}-{time.monotonic_ns()}"[:255]
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _beside(dir_fd: int, name: str, agent_id: str) -> str:
    """A free name next to `name` for the child's version: `notes.agent-3fa2.txt`."""
    stem, dot, suffix = name.rpartition(".") if "." in name.lstrip(".") else (name, "", "")
    label = agent_id or "subagent"
    for number in range(1000):
        extra = f"-{number}" if number else ""
        candidate = f"{stem}.{label}{extra}{dot}{suffix}"[:255]
        if _lstat(dir_fd, candidate) is None:
            return candidate
    raise OSError(errno.EEXIST, f"no free name beside {name}")


def _apply_one(root: int, changes: ChangeSet, change: FileChange, journal: Journal) -> AppliedFile:
    removing = change.kind == "removed"
    with parent_of(root, change.path, make=not removing) as (dir_fd, name):
        current = _lstat(dir_fd, name)
        if current is not None and stat.S_ISDIR(current.st_mode):
            return AppliedFile(path=change.path, outcome="failed", note="a folder of that name is in the folder now")
        changed_since = current is not None and current.st_ctime_ns >= changes.started_ns
        conflict = (current is None) if change.kind != "added" else (current is not None)
        conflict = conflict or changed_since
        old = _read(name, dir_fd, TEXT_LIMIT) if current is not None and stat.S_ISREG(current.st_mode) else None
        if not conflict:
            if old is not None and len(old) <= TEXT_LIMIT and current is not None:
                journal.keep(change.path, old, changed_ns=current.st_ctime_ns, replaced_ns=now_ns())
            if removing:
                os.unlink(name, dir_fd=dir_fd)
            else:
                _put_child_version(changes, change, dir_fd, name)
            return AppliedFile(path=change.path, outcome="applied")
        if removing:
            if current is None:
                return AppliedFile(path=change.path, outcome="applied", note="already removed in the folder")
            return AppliedFile(path=change.path, outcome="kept", note="changed in the folder since the subagent "
                               "started, so it is not removed")
        merged = _merged(changes, change, journal, old) if change.kind == "changed" else None
        if merged is not None and current is not None:
            journal.keep(change.path, old or b"", changed_ns=current.st_ctime_ns, replaced_ns=now_ns())
            _write_bytes(merged, dir_fd, name, stat.S_IMODE(current.st_mode))
            return AppliedFile(path=change.path, outcome="merged",
                               note="it changed in the folder too; both sides' edits are in it")
        if current is None:  # removed in the folder meanwhile: the child's version goes beside, nothing is lost
            saved = _beside(dir_fd, name, changes.agent_id)
            _put_child_version(changes, change, dir_fd, saved)
            return AppliedFile(path=change.path, outcome="kept", saved_as=_sibling(change.path, saved),
                               note="removed in the folder since the subagent started")
        saved = _beside(dir_fd, name, changes.agent_id)
        _put_child_version(changes, change, dir_fd, saved)
        return AppliedFile(path=change.path, outcome="kept", saved_as=_sibling(change.path, saved),
                           note="changed in the folder too, and the edits overlap: the folder's version is kept")


def _sibling(path: str, name: str) -> str:
    head, _, _ = path.rpartition("/")
    return f"{head}/{name}" if head else name


def _put_child_version(changes: ChangeSet, change: FileChange, dir_fd: int, name: str) -> None:
    source_fd, source = _upper_version(changes, change)
    try:
        _write_from(source_fd, source, dir_fd, name, change.link)
    finally:
        os.close(source_fd)


def _merged(changes: ChangeSet, change: FileChange, journal: Journal, folder_now: bytes | None) -> bytes | None:
    """Both sides' edits, merged three ways; None where there is no base, no text, or edits overlap."""
    if change.link is not None or folder_now is None or len(folder_now) > TEXT_LIMIT:
        return None
    base = journal.base(change.path, changes.started_ns)
    source_fd, source = _upper_version(changes, change)
    try:
        mine = _read(source, source_fd, TEXT_LIMIT)
    finally:
        os.close(source_fd)
    texts = []
    for data in (base, folder_now, mine):
        if data is None or len(data) > TEXT_LIMIT or b"\0" in data:
            return None
        try:
            texts.append(data.decode("utf-8").splitlines(keepends=True))
        except UnicodeDecodeError:
            return None
    lines: list[str] = []
    for group in merge3.Merge3(texts[0], texts[1], texts[2]).merge_groups():
        if group[0] != "conflict":
            lines += group[1]
        elif not group[1]:  # both only added lines at one place: keep both, the folder's first
            lines += _union(list(group[2]), list(group[3]))
        else:
            return None
    return "".join(lines).encode("utf-8")


def _union(folder: list[str], child: list[str]) -> list[str]:
    """Lines both added at one place: the folder's, then the child's that are not already there (a child that
    started from a version which already had some of the folder's additions holds them too)."""
    same = 0
    while same < min(len(folder), len(child)) and folder[same] == child[same]:
        same += 1
    return [*_ended(folder), *child[same:]] if same < len(child) else folder


def _ended(lines: Sequence[str]) -> list[str]:
    """`lines` whose last one ends with a newline (so the other side's additions start on a line of their own)."""
    out = list(lines)
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    return out
