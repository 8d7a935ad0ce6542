"""New names a cell made where the person's tools look: what the sandbox cannot refuse, said instead.

A sandboxed kernel cannot change a `.git`, `.vscode` or `.env` that was there when it started (they are
kept read-only), but nothing refuses a name that did not exist yet. So the host looks at the working
folder's top level before and after each cell of a sandboxed kernel, and a cell that made such a name gets
a notice in its output, for the person (and the model) to see.
"""

from __future__ import annotations

import os
from pathlib import Path

from .profiles import KEPT_READ_ONLY

__all__ = ["created_notice", "watched_names"]


def watched_names(working_dir: Path) -> frozenset[str]:
    """The names at the working folder's top level that tools run or read later on the person's account."""
    try:
        names = os.listdir(working_dir)
    except OSError:
        return frozenset()
    return frozenset(name for name in names if name in KEPT_READ_ONLY or name.startswith(".env"))


def created_notice(before: frozenset[str], working_dir: Path) -> str | None:
    """The notice for names made since `before` (None when none were)."""
    made = sorted(watched_names(working_dir) - before)
    if not made:
        return None
    listed = ", ".join(made)
    return (f"[sandbox] This cell created {listed} in the working folder. The sandbox keeps what was there "
            "read-only but cannot refuse a new name: look at it before you run git, an editor or direnv here.")
