"""What `.ci/run` builds while the tests already run: the system tools, the Enterprise Gateway and Phoenix environments.

On a fresh machine `.ci/run` starts these builds in the background and goes straight on to the README's test line,
so installing Chromium or an 850 MB environment does not hold up the project's own install and the tests that need
none of them. Each build ends by creating a `ready` file (or a `<folder>.failed` one beside its folder); a test
that needs it waits here, up to a time `.ci/run` sets, and is skipped with the reason when it is not there.
Outside CI nothing is being built: no variable is set and nothing waits.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

TOOLS_ENV = "FREEACT_SUB_CI_TOOLS"
"""The folder the system tools' install reports to: `ready` when it is over, `missing` naming what it could not get."""
TOOLS_WAIT_ENV = "FREEACT_SUB_CI_TOOLS_WAIT"


def wait_for_build(folder: Path, wait: float, what: str) -> str | None:
    """None once `folder/ready` exists; else why not, after at most `wait` seconds (0: do not wait)."""
    failed = folder.parent / f"{folder.name}.failed"
    deadline = time.monotonic() + wait
    while not (folder / "ready").exists():
        if failed.exists():
            return f"{what} could not be built (see {folder.name}.log)"
        if time.monotonic() > deadline:
            return f"{what} was not built within {wait:.0f} s" if wait else f"{what} is not built"
        time.sleep(1)
    return None


def wait_for_system_tools() -> list[str]:
    """Wait until `.ci/run`'s install of the system tools is over (if one runs); the tools it could not install."""
    missing = os.environ.get("FREEACT_SUB_MISSING_TOOLS", "").split()
    folder = os.environ.get(TOOLS_ENV, "").strip()
    if not folder:
        return missing
    why = wait_for_build(Path(folder), float(os.environ.get(TOOLS_WAIT_ENV, "600")), "the system tools")
    if why is not None:
        raise RuntimeError(f".ci/run's install of the system tools: {why}")
    report = Path(folder) / "missing"
    return missing + (report.read_text().split() if report.exists() else [])
