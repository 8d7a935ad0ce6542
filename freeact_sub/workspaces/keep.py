"""A change set that was not applied, kept: the child's versions, what it removed, and its diff, in a folder.

Kept in the session's folder (`changes/<agent id>/`), so nothing is lost when the host exits; it goes when the
session is deleted. The child's files are read without following links and written only beneath `into`.
"""

from __future__ import annotations

import os
from pathlib import Path

from .changes import ChangeSet

__all__ = ["KEPT_FOLDER", "keep_changes", "kept_sets"]

KEPT_FOLDER = "changes"
"""The folder of a session that holds its change sets that were not applied."""
_CHUNK = 1 << 16


def keep_changes(changes: ChangeSet, into: Path) -> Path:
    """Save `changes` under `into` (made): `files/` with the child's versions, `removed.txt`, `changes.diff`,
    `summary.txt`; returns `into`."""
    files = into / "files"
    files.mkdir(parents=True, exist_ok=True)
    removed = [c.path for c in changes.changes if c.kind == "removed"]
    (into / "removed.txt").write_text("".join(f"{path}\n" for path in removed))
    (into / "changes.diff").write_text("".join(c.diff for c in changes.changes if c.diff))
    (into / "summary.txt").write_text(changes.summary() + "\n")
    for change in changes.changes:
        if change.kind == "removed":
            continue
        target = files / change.path
        target.parent.mkdir(parents=True, exist_ok=True)
        source = changes.upper / change.path
        if change.link is not None:
            os.symlink(change.link, target)
            continue
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                while chunk := os.read(fd, _CHUNK):
                    os.write(out, chunk)
            finally:
                os.close(out)
        finally:
            os.close(fd)
    return into


def kept_sets(session_folder: Path) -> list[tuple[str, str]]:
    """The change sets kept in a session: (agent id, its summary), oldest first."""
    root = session_folder / KEPT_FOLDER
    if not root.is_dir():
        return []
    found = sorted((p for p in root.iterdir() if p.is_dir() and not p.is_symlink()), key=lambda p: p.stat().st_mtime)
    out = []
    for folder in found:
        try:
            summary = (folder / "summary.txt").read_text().strip()
        except OSError:
            summary = ""
        out.append((folder.name, summary))
    return out
