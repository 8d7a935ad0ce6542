"""The host's private temporary folders: made, removed, swept.

A kernel's folder (`kernel-*`: its connection file with its HMAC key, its log, and the folders the
kernel itself may write: `run/` for its sockets, including its code-tools listener, `tmp/`, `ipython/`)
lives in one private root per user, `$TMPDIR/freeact-sub-<uid>` (mode 0700, `private_root()`), which a
sandboxed kernel sees empty but for its own folder. (An older version kept kernel and code-tools folders
directly in `$TMPDIR`; those are still swept.) Each holds a file `owner` with the PID of the host process that made it.
`Kernel.shutdown()` (or the channel's `close()`) removes the folder; folders still
there when the host exits normally are removed at exit; and a host that died (a killed notebook
kernel) leaves folders that the next host to make one sweeps: only those whose owner process is
gone, so folders of other live hosts are never touched. A child's copy-on-write workspace (`ws-*`: the
upper and work folders of its overlay, `create(WORKSPACE_PREFIX)`) is made here the same way and swept the
same way; what its kernel wrote there may include folders it made unwritable, which are made writable
again (no link followed) before the whole is removed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import stat
import tempfile
import time
from pathlib import Path

__all__ = [
    "PREFIX",
    "TOOLS_PREFIX",
    "WORKSPACE_PREFIX",
    "claim",
    "create",
    "private_root",
    "remove",
    "sweep",
    "sweep_owned",
]

PREFIX = "kernel-"
"""A kernel's folder in the private root (short: a kernel's socket paths must fit in 103 bytes, macOS's
`$TMPDIR` alone takes about 50)."""
TOOLS_PREFIX = "freeact-sub-tools-"
"""An agent's code-tools folder of an older version (directly in `$TMPDIR`): only swept now."""
WORKSPACE_PREFIX = "ws-"
"""A child's copy-on-write workspace in the private root (swept there only: `$TMPDIR` is not ours alone)."""
_PREFIXES = (PREFIX, "freeact-sub-kernel-", TOOLS_PREFIX)
"""Kernel folders in the private root, and both kinds of an older version, directly in `$TMPDIR`."""
OWNER_FILE = "owner"
_EMPTY_GRACE = 60.0  # seconds an empty folder without an owner is left alone (it may be being made)

_live: set[str] = set()
_swept = False


def private_root() -> str:
    """The folder that holds every private folder of this user's hosts: made once, mode 0700, never a link.

    A folder of that name that is a link, someone else's, or open to others is refused (another user could
    otherwise read the kernels' keys or plant sockets there).
    """
    root = os.path.join(tempfile.gettempdir(), f"freeact-sub-{os.getuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(root, 0o700)
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{root} is not a private folder of this user (a link, another user's, or open to "
                              "others): remove it, or set TMPDIR to another folder")
    return root


def create(prefix: str = PREFIX) -> str:
    """A new private folder (mode 0700) for one kernel, in the private root.

    It is marked with this process as its owner; the first folder a host makes sweeps those of hosts that died.
    """
    global _swept
    if not _swept:
        _swept = True
        sweep()
    path = tempfile.mkdtemp(prefix=prefix, dir=private_root())
    Path(path, OWNER_FILE).write_text(str(os.getpid()))
    _live.add(path)
    return path


def remove(path: str) -> None:
    """Remove a kernel's folder (its kernel is gone)."""
    _live.discard(path)
    shutil.rmtree(path, ignore_errors=True)


def sweep(root: str | None = None) -> list[str]:
    """Remove the folders (of both kinds) whose owner process is gone; returns their paths."""
    removed = []
    private = Path(root) if root else Path(private_root())
    bases = [private] if root else [private, Path(tempfile.gettempdir())]  # (and where they were)
    folders = [folder for base in bases for prefix in _PREFIXES for folder in sorted(base.glob(prefix + "*"))]
    folders += sorted(private.glob(WORKSPACE_PREFIX + "*"))
    for folder in folders:
        try:
            owner = int((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            # No owner recorded (yet). An empty folder that has stayed so for a minute is what a
            # removal leaves when a dying kernel's socket file appeared during it and was then
            # unlinked by the kernel itself: nothing in it to protect. A code-tools folder of an
            # older version (no owner file) is dead when nobody listens on its socket any more.
            with contextlib.suppress(OSError):
                old = time.time() - folder.stat().st_mtime > _EMPTY_GRACE
                if old and not any(folder.iterdir()):
                    folder.rmdir()
                    removed.append(str(folder))
                elif old and folder.name.startswith(_PREFIXES[:2]) and _kernel_remnant(folder):
                    shutil.rmtree(folder, ignore_errors=True)
                    removed.append(str(folder))
                elif old and folder.name.startswith(TOOLS_PREFIX) and _nobody_listens(folder / "tools.sock"):
                    shutil.rmtree(folder, ignore_errors=True)
                    removed.append(str(folder))
            continue
        if not _alive(owner):
            if folder.name.startswith(WORKSPACE_PREFIX):
                from ..workspaces.folder import unlock_folders  # here: the package is not needed at every start

                unlock_folders(folder)
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    return removed


def claim(folder: Path) -> None:
    """Mark a folder made elsewhere (an agent's generated `mcptools` package) as this process's."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / OWNER_FILE).write_text(str(os.getpid()))


def sweep_owned(parent: Path) -> list[str]:
    """Remove the claimed folders in `parent` whose owner process is gone (a host that died); returns them."""
    removed = []
    for folder in sorted(parent.glob("*")):
        try:
            owner = int((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not claimed: not ours to judge
        if not _alive(owner):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    return removed


def _kernel_remnant(folder: Path) -> bool:
    """Whether an owner-less kernel folder holds only what a kernel makes after its folder was removed.

    A kernel forked while its start was being cancelled can bind its sockets, make its `ipython` folder and open its
    `kernel.log` after the host removed the connection folder; the zygote then ends it. What is left is only those,
    with nobody listening (a live kernel's folder always has its owner file).
    """
    entries = list(folder.iterdir())
    run = folder / "run"
    sockets = [entry for entry in (run.iterdir() if run.is_dir() else ()) if entry.is_socket()]
    sockets += [entry for entry in entries if entry.name.startswith("socket-")]  # the layout before `run/`
    return all(entry.name in ("ipython", "run", "tmp", "kernel.log") or entry in sockets for entry in entries) and all(
        _nobody_listens(entry) for entry in sockets
    )


def _nobody_listens(path: Path) -> bool:
    """Whether the Unix socket at `path` is a leftover: connecting is refused (its server process is gone)."""
    if not path.is_socket():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            return True
        except OSError:
            return False
    return False


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
