"""One child's workspace: the host-owned folders of its copy-on-write view, and when it began."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["ISOLATIONS", "Isolation", "Workspace", "now_ns"]

Isolation = Literal["shared", "copy-on-write"]
"""How a child's kernel sees the working folder: `shared` (writes land in it at once, the default) or
`copy-on-write` (a view of its own; its writes come back as a change set)."""
ISOLATIONS: tuple[str, ...] = ("shared", "copy-on-write")


def now_ns() -> int:
    """The clock file times are taken from (coarse: a file changed after this moment never has an older ctime)."""
    return time.clock_gettime_ns(getattr(time, "CLOCK_REALTIME_COARSE", time.CLOCK_REALTIME))


@dataclass(kw_only=True)
class Workspace:
    """The folders behind one child's view of `lower` (the working folder).

    `folder` is the host's (in the private root no kernel sees): `upper/` takes the child's writes through the
    overlay, `work/` is the overlay's scratch. `started_ns` is when the view was made (`now_ns()`): what
    changed in the working folder after it is a possible conflict.
    """

    folder: Path
    lower: Path
    agent_id: str = ""
    started_ns: int = field(default_factory=lambda: now_ns())

    @classmethod
    def create(cls, folder: str | os.PathLike[str], lower: Path, agent_id: str = "") -> Workspace:
        """Make `upper/` and `work/` in `folder` (a new private folder of the host's) for a view of `lower`."""
        path = Path(folder)
        for name in ("upper", "work"):
            os.mkdir(path / name, 0o700)
        return cls(folder=path, lower=Path(os.path.realpath(lower)), agent_id=agent_id)

    @property
    def upper(self) -> Path:
        """Where the child's writes land (whiteouts for removals)."""
        return self.folder / "upper"

    def plan(self) -> dict[str, str]:
        """The sandbox plan's `overlay` entry (`sandbox/overlay_mount.py`)."""
        return {"lower": str(self.lower), "upper": str(self.upper), "work": str(self.folder / "work")}

    def remove(self) -> None:
        """Remove its folders (its change set was applied or saved)."""
        shutil.rmtree(self.folder, ignore_errors=True)
