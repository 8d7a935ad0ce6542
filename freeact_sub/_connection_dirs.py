"""Kernels' private connection folders (`/tmp/freeact-sub-kernel-*`): made, removed, swept.

A folder holds a kernel's connection file (with its HMAC key), its sockets and its log, and a
file `owner` with the PID of the host process that made it. `Kernel.shutdown()` removes the
folder; folders still there when the host exits normally are removed at exit; and a host that
died (a killed notebook kernel) leaves folders that the next host to start a kernel sweeps:
only those whose owner process is gone, so folders of other live hosts are never touched.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

__all__ = ["PREFIX", "create", "remove", "sweep"]

PREFIX = "freeact-sub-kernel-"
OWNER_FILE = "owner"
_EMPTY_GRACE = 60.0  # seconds an empty folder without an owner is left alone (it may be being made)

_live: set[str] = set()
_swept = False


def create() -> str:
    """A new private folder for one kernel, marked with this process as its owner."""
    global _swept
    if not _swept:
        _swept = True
        sweep()
    path = tempfile.mkdtemp(prefix=PREFIX)
    Path(path, OWNER_FILE).write_text(str(os.getpid()))
    _live.add(path)
    return path


def remove(path: str) -> None:
    """Remove a kernel's folder (its kernel is gone)."""
    _live.discard(path)
    shutil.rmtree(path, ignore_errors=True)


def sweep(root: str | None = None) -> list[str]:
    """Remove the folders whose owner process is gone; returns their paths."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(PREFIX + "*"):
        try:
            owner = int((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            # No owner recorded (yet). An empty folder that has stayed so for a minute is what a
            # removal leaves when a dying kernel's socket file appeared during it and was then
            # unlinked by the kernel itself: nothing in it to protect.
            with contextlib.suppress(OSError):
                if time.time() - folder.stat().st_mtime > _EMPTY_GRACE and not any(folder.iterdir()):
                    folder.rmdir()
                    removed.append(str(folder))
            continue
        if not _alive(owner):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    # a zombie (exited, not yet reaped by its parent) is gone as far as its folders are concerned
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


@atexit.register
def _remove_all() -> None:
    for path in list(_live):
        remove(path)
