"""Write the working folder back to a checkpoint's state: only what differs, never through a link.

The folder was written by a kernel, so any part of it may be a link aimed out of it. Every path is reached
from the folder's descriptor one part at a time with `O_NOFOLLOW` (`below.parent_of`); what is in the way of
the checkpoint's version (a file where a folder was, a link where a file was) is removed as itself (`unlink`,
or `shutil.rmtree` with a descriptor, which follows no link) and the version is written beside its place and
renamed over it. A path that cannot be restored is reported, never followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .below import DIR_FLAGS, parent_of, put_in_place

if TYPE_CHECKING:
    from .blobs import BlobStore
    from .folder_state import Record

__all__ = ["RestoreReport", "write_back"]


@dataclass(kw_only=True)
class RestoreReport:
    """What a rewind did to the folder."""

    restored: list[str] = field(default_factory=list)
    """Paths written back (files, links, folders) to the checkpoint's version."""
    removed: list[str] = field(default_factory=list)
    """Paths removed: they were not there at the checkpoint."""
    failed: list[tuple[str, str]] = field(default_factory=list)
    """Paths that could not be restored, and why."""

    @property
    def touched(self) -> list[str]:
        """Every path this rewind changed (or tried to)."""
        return [*self.removed, *self.restored, *(path for path, _ in self.failed)]


def _differs(a: Record | None, b: Record | None) -> bool:
    if a is None or b is None:
        return a is not b
    return a[0] != b[0] or a[1] != b[1] or a[6] != b[6]


def write_back(
    working_dir: Path, current: dict[str, Record], target: dict[str, Record], blobs: BlobStore
) -> RestoreReport:
    """Make the folder `working_dir` hold `target` where it now holds `current` (see the module's docstring)."""
    report = RestoreReport()
    root = os.open(working_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        differing = [p for p in {*current, *target} if _differs(current.get(p), target.get(p))]
        # first out of the way, deepest first: what is not in the checkpoint, or is another kind there
        for path in sorted(differing, key=lambda p: -p.count("/")):
            now, then = current.get(path), target.get(path)
            if now is None or (then is not None and now[0] == then[0] and then[0] != "o"):
                continue
            if then is not None and now[0] == "d" and then[0] == "d":
                continue
            try:
                _remove(root, path)
                if then is None:
                    report.removed.append(path)
            except FileNotFoundError:
                if then is None:
                    report.removed.append(path)
            except OSError as exc:
                report.failed.append((path, _why(exc)))
        # then the checkpoint's versions, shallowest first (a folder before what it holds)
        for path in sorted((p for p in differing if p in target), key=lambda p: p.count("/")):
            record = target[path]
            if any(failed == path for failed, _ in report.failed):
                continue
            try:
                _write(root, path, record, blobs)
                report.restored.append(path)
            except OSError as exc:
                report.failed.append((path, _why(exc)))
    finally:
        os.close(root)
    return report


def _why(exc: OSError) -> str:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return "a link is in the way (not followed)"
    return exc.strerror or str(exc)


def _remove(root: int, path: str) -> None:
    with parent_of(root, path) as (fd, name):
        try:
            os.unlink(name, dir_fd=fd)
        except IsADirectoryError:
            shutil.rmtree(name, dir_fd=fd)
        except PermissionError:  # Linux says EISDIR; some systems EPERM for a folder
            shutil.rmtree(name, dir_fd=fd)


def _write(root: int, path: str, record: Record, blobs: BlobStore) -> None:
    kind, mode, _size, mtime_ns = record[0], record[1], record[2], record[3]
    with parent_of(root, path, make=True) as (fd, name):
        if kind == "d":
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=fd)
            folder = os.open(name, DIR_FLAGS, dir_fd=fd)
            try:
                os.fchmod(folder, mode)
            finally:
                os.close(folder)
            return
        if kind == "o":
            return  # a pipe, socket or device: not kept, not made
        tmp = f".{name[:200]}.rewind-{secrets.token_hex(4)}"
        if kind == "l":
            os.symlink(record[6], tmp, dir_fd=fd)
        else:
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)
            try:
                for chunk in blobs.chunks(record[6]):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(out, view) :]
                os.fchmod(out, mode)
                os.utime(out, ns=(mtime_ns, mtime_ns))
            except BaseException:
                os.close(out)
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=fd)
                raise
            os.close(out)
        put_in_place(tmp, name, fd)
