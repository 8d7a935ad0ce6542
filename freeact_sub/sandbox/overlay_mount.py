"""A copy-on-write view of the working folder, mounted in a kernel's own mount namespace. Linux ≥ 5.11, no root.

The standard library alone, like `enforce.py`, which loads this file by its path and calls `mount_over` right
after it entered the kernel's user and mount namespaces (before anything is covered, bound read-only or given
to Landlock, so that all of those apply to the view, not to the folder beneath it):

    {"lower": working folder, "upper": host-owned folder, "work": host-owned folder beside it}

The view is an overlay whose lower layer is the working folder and whose upper layer is a folder of the host's
that the kernel never sees by any other path (it lives in the private root, which the kernel sees empty). The
kernel's writes land in the upper layer only: whiteouts for what it removed, whole files for what it added or
changed. The working folder itself stays as it was; its Landlock rule is made on the view, so the folder
beneath the view is not writable by any other name either (`/proc/<pid>/cwd` of a process outside included).
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any

__all__ = ["mount_over", "options"]

_MS_NOSUID, _MS_NODEV = 2, 4


def options(plan: dict[str, Any]) -> str:
    """The overlay's mount options; `userxattr` is what lets an unprivileged user namespace mark removed folders."""
    for key in ("lower", "upper", "work"):
        value = plan.get(key)
        if not isinstance(value, str) or not os.path.isabs(value) or any(c in value for c in ",:\\\n"):
            raise OSError(errno.EINVAL, f"overlay: {key} must be an absolute path without ',', ':' or '\\'")
    return f"userxattr,lowerdir={plan['lower']},upperdir={plan['upper']},workdir={plan['work']}"


def mount_over(plan: dict[str, Any]) -> None:
    """Mount the view on the working folder itself and move this process into it (its old cwd was beneath)."""
    libc = ctypes.CDLL(None, use_errno=True)
    target = plan["lower"]
    result = libc.mount(b"overlay", target.encode(), b"overlay", ctypes.c_ulong(_MS_NOSUID | _MS_NODEV),
                        options(plan).encode())
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount the copy-on-write view of {target}: {os.strerror(code)}")
    os.chdir(target)
