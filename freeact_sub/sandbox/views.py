"""Whether this machine can give a kernel a copy-on-write view of its working folder (`overlay_mount.py`)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile

from . import kernel_folders

__all__ = ["copy_on_write_platform_problem", "copy_on_write_problem"]


def copy_on_write_platform_problem() -> str | None:
    """Why this platform, by what it is (no sandbox, a Linux older than 5.11), offers no views; None if it should.

    Tests skip on this, not on `copy_on_write_problem()`: a view that does not work where it should is a failure.
    """
    from . import platform_problem

    if (problem := platform_problem()) is not None:
        return problem
    release = os.uname().release.split(".")
    try:
        if (int(release[0]), int(release[1].split("-")[0])) < (5, 11):
            return f"copy-on-write views need Linux 5.11 or newer (this is {os.uname().release})"
    except (ValueError, IndexError):
        pass
    return None


@functools.cache
def copy_on_write_problem() -> str | None:
    """Why a kernel cannot get a copy-on-write view here (checked once per process), or None if it can.

    It needs Linux 5.11 or newer (an overlay mounted in a user namespace) and a sandbox this machine enforces;
    the check mounts a view of an empty folder in a throwaway process.
    """
    from . import ENFORCE_SCRIPT

    if (problem := copy_on_write_platform_problem()) is not None:
        return problem
    folder = tempfile.mkdtemp(prefix="cow-probe-", dir=kernel_folders.private_root())
    try:
        for name in ("lower", "upper", "work"):
            os.mkdir(os.path.join(folder, name), 0o700)
        view = {name: os.path.join(folder, name) for name in ("lower", "upper", "work")}
        plan = {"deny": [], "write": [view["lower"]], "network": False, "scratch": folder, "overlay": view}
        probe = [sys.executable, "-c", "open('probe', 'w').write('x')"]
        subprocess.run([sys.executable, ENFORCE_SCRIPT, json.dumps(plan), "--", *probe], check=True,
                       capture_output=True, timeout=30, cwd=view["lower"])
        if not os.path.exists(os.path.join(view["upper"], "probe")) or os.path.exists(os.path.join(view["lower"],
                                                                                                      "probe")):
            return "an overlay mounted in a user namespace did not keep the writes apart"
    except subprocess.CalledProcessError as exc:
        reason = exc.stderr.decode(errors="replace").strip().removeprefix("freeact-sub sandbox: ")
        return f"this machine cannot mount an overlay in a user namespace ({reason or 'the probe failed'})"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the copy-on-write probe could not run ({exc})"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return None
