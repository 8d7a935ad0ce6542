"""A child's change set, read from the upper layer of its view: what it added, changed and removed.

The upper layer holds what the child's kernel wrote, so everything in it is hostile input: names are taken as
they are (never joined with anything but the folder they were found in), links are reported as links and never
followed, and only regular files and links are changes (a FIFO or socket the kernel made is left out and said so).
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["ChangeSet", "FileChange", "file_change", "lstat_in", "read_changes"]

ChangeKind = Literal["added", "changed", "removed"]

TEXT_LIMIT = 1 << 20
"""The largest file shown as a text diff (bytes); a larger one is shown by its size."""
DIFF_LINES = 2000
"""The most lines of one file's diff kept (the rest is cut and said so)."""
_OPAQUE = "user.overlay.opaque"
_CHUNK = 1 << 16


@dataclass(kw_only=True)
class FileChange:
    """One file of a change set.

    `apply` is the decision for this file alone: set it to False (a person's per-file choice) before the request
    is approved and the file is left as it is in the folder.
    """

    path: str
    """Relative to the working folder, with `/` between parts."""
    kind: ChangeKind
    link: str | None = None
    """For a symbolic link the child made: where it points (it is made as a link, never followed)."""
    size: int = 0
    """The child's version's size in bytes (0 for a removal)."""
    text: bool = False
    """Whether both sides are text (UTF-8, no NUL, at most `TEXT_LIMIT` bytes): then `diff` holds a diff."""
    diff: str = ""
    """A unified diff of the folder's version (at the time the set was read) to the child's."""
    conflict: str | None = None
    """Why this file may clash with the folder (it changed there after the child started); None if it does not."""
    apply: bool = True
    """Whether this file is to be applied (a per-file choice; the whole set is approved or rejected as a request)."""

    def summary(self) -> str:
        """One line: what happened to the file, with the diff's size for text."""
        if self.kind == "removed":
            what = "removed"
        elif self.link is not None:
            what = f"{self.kind} (a link to {self.link})"
        elif self.text:
            plus = sum(1 for line in self.diff.splitlines() if line.startswith("+") and not line.startswith("+++"))
            minus = sum(1 for line in self.diff.splitlines() if line.startswith("-") and not line.startswith("---"))
            what = f"{self.kind} (+{plus} -{minus})"
        else:
            what = f"{self.kind} ({self.size} bytes)"
        return f"{self.path}: {what}" + (f" — conflict: {self.conflict}" if self.conflict else "")


@dataclass(kw_only=True)
class ChangeSet:
    """What one child changed in its view of the working folder, file by file."""

    agent_id: str
    folder: Path
    """The working folder the set applies to."""
    upper: Path
    """Where the child's versions are (host-owned)."""
    started_ns: int
    """When the child's view was made: a folder file changed after it may conflict."""
    changes: list[FileChange] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """What the child made that is not a file or link (a FIFO, a socket), left out."""
    removed_folders: list[str] = field(default_factory=list)
    """Folders it removed (their files are removals of their own); removed when applied if nothing is left in them."""

    def __bool__(self) -> bool:
        return bool(self.changes)

    def paths(self) -> list[str]:
        """The paths of its changes."""
        return [change.path for change in self.changes]

    def summary(self) -> str:
        """One line per file."""
        lines = [change.summary() for change in self.changes]
        lines += [f"{path}: left out (not a file or link)" for path in self.skipped]
        return "\n".join(lines)


def read_changes(upper: Path, folder: Path, *, agent_id: str = "", started_ns: int = 0) -> ChangeSet:
    """The change set in `upper` (the upper layer of a view of `folder`), diffs against `folder` as it is now.

    Read once the child's kernel has stopped (nothing writes `upper` then). A file copied up but left with the
    same bytes (a `touch`, a `chmod`) is no change.
    """
    found = ChangeSet(agent_id=agent_id, folder=folder, upper=upper, started_ns=started_ns)
    for relative, entry_stat, opaque in _walk(upper, ""):
        lower = lstat_in(folder, relative)
        mode = entry_stat.st_mode
        if stat.S_ISCHR(mode) and entry_stat.st_rdev == 0:  # a whiteout: removed
            found.changes += [FileChange(path=p, kind="removed") for p in _lower_files(folder, relative, lower)]
            if lower is not None and stat.S_ISDIR(lower.st_mode):
                found.removed_folders += [relative, *_lower_folders(folder, relative)]
        elif stat.S_ISDIR(mode):
            if opaque and lower is not None and stat.S_ISDIR(lower.st_mode):  # it replaced a folder of the same name
                kept = {p for p, s, _ in _walk(upper / relative, relative) if not stat.S_ISDIR(s.st_mode)}
                found.changes += [FileChange(path=p, kind="removed")
                                  for p in _lower_files(folder, relative, lower) if p not in kept]
            elif lower is not None and not stat.S_ISDIR(lower.st_mode):
                found.changes.append(FileChange(path=relative, kind="removed"))  # a file became a folder
        elif stat.S_ISLNK(mode):
            target = os.readlink(upper / relative)
            if lower is not None and stat.S_ISLNK(lower.st_mode) and os.readlink(folder / relative) == target:
                continue
            found.changes.append(FileChange(path=relative, kind="changed" if lower else "added", link=target))
        elif stat.S_ISREG(mode):
            change = file_change(upper, folder, relative, entry_stat, lower)
            if change is not None:
                found.changes.append(change)
        else:
            found.skipped.append(relative)
    found.changes.sort(key=lambda change: change.path)
    return found


def _walk(root: Path, prefix: str) -> Iterator[tuple[str, os.stat_result, bool]]:
    """Every entry beneath `root` as (relative path, lstat, opaque folder), parents first, links not followed."""
    try:
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        relative = f"{prefix}/{entry.name}" if prefix else entry.name
        info = entry.stat(follow_symlinks=False)
        is_dir = stat.S_ISDIR(info.st_mode)
        opaque = is_dir and _opaque(entry.path)
        yield relative, info, opaque
        if is_dir and not opaque:
            yield from _walk(Path(entry.path), relative)


def _opaque(path: str) -> bool:
    try:
        return os.getxattr(path, _OPAQUE, follow_symlinks=False) == b"y"
    except OSError:
        return False


def lstat_in(folder: Path, relative: str) -> os.stat_result | None:
    """`relative`'s lstat in `folder`, or None where there is nothing."""
    try:
        return os.lstat(folder / relative)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _lower_files(folder: Path, relative: str, lower: os.stat_result | None) -> list[str]:
    """The files (and links) at or beneath `relative` in the folder: what removing it removed."""
    if lower is None:
        return []
    if not stat.S_ISDIR(lower.st_mode):
        return [relative]
    return [p for p, s, _ in _walk(folder / relative, relative) if not stat.S_ISDIR(s.st_mode)]


def _lower_folders(folder: Path, relative: str) -> list[str]:
    return [p for p, s, _ in _walk(folder / relative, relative) if stat.S_ISDIR(s.st_mode)]


def file_change(
    upper: Path, folder: Path, relative: str, info: os.stat_result, lower: os.stat_result | None
) -> FileChange | None:
    """The change of the file the child left at `relative` in `upper` against the folder's (`lower`), or None where
    the bytes are the same."""
    mine = _read_head(upper / relative, TEXT_LIMIT + 1)
    if lower is not None and stat.S_ISREG(lower.st_mode):
        theirs = _read_head(folder / relative, TEXT_LIMIT + 1)
        if lower.st_size == info.st_size and _same(upper / relative, folder / relative):
            return None
    else:
        theirs = b""
    kind: ChangeKind = "changed" if lower is not None else "added"
    change = FileChange(path=relative, kind=kind, size=info.st_size)
    old, new = _text(theirs), _text(mine)
    if old is not None and new is not None:
        change.text = True
        lines = list(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                          f"a/{relative}", f"b/{relative}"))
        if len(lines) > DIFF_LINES:
            lines = [*lines[:DIFF_LINES], f"... ({len(lines) - DIFF_LINES} more lines of diff)\n"]
        change.diff = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                              for line in lines)
    return change


def _open(path: Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)


def _read_head(path: Path, limit: int) -> bytes:
    fd = _open(path)
    try:
        chunks, left = [], limit
        while left > 0 and (chunk := os.read(fd, min(_CHUNK, left))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _same(a: Path, b: Path) -> bool:
    fa, fb = _open(a), _open(b)
    try:
        while True:
            ca, cb = os.read(fa, _CHUNK), os.read(fb, _CHUNK)
            if ca != cb:
                return False
            if not ca:
                return True
    finally:
        os.close(fa)
        os.close(fb)


def _text(data: bytes) -> str | None:
    if len(data) > TEXT_LIMIT or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
