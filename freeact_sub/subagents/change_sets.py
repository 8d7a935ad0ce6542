"""A child with a workspace of its own: made before it starts, and its change set decided when it ends.

`open_workspace` makes the host-owned folders of a child's copy-on-write view, or a private copy of the folder
where no view can be had (or says why neither can);
`settle` reads the ended child's change set, asks its parent's gate about it (`tool_name="apply_changes"`:
hooks, rules, standing decisions, then the person, like any call), applies what was approved and tells the
parent's model what became of each file. A rejected (or never decided) set stays on disk, and the result says where.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ..events import ApprovalRequest, Emit
from ..sandbox import copy_on_write_problem, kernel_folders
from ..workspaces import (
    ChangeSet,
    FolderTooLargeToCopy,
    Journal,
    Workspace,
    apply_changes,
    keep_changes,
    mark_conflicts,
)

__all__ = ["APPLY_CHANGES", "AskGate", "open_workspace", "settle"]

APPLY_CHANGES = "apply_changes"
"""The tool name of the decision to apply a child's change set (rules: `apply_changes: allow`)."""

AskGate = Callable[..., Awaitable[ApprovalRequest]]
"""The parent's `ApprovalGate.ask`."""


def open_workspace(
    working_dir: Path, *, enforced: bool, local: bool, copy: bool = False, copy_limit: int = 1 << 30
) -> Workspace | str:
    """A new workspace over `working_dir`, or why a child cannot have one here (a sentence for the model).

    A copy-on-write view where the sandbox is enforced and this machine mounts one; else (or with `copy`) a
    private copy of the folder, refused past `copy_limit` bytes. Blocking: a copy may take a while.
    """
    if not local:
        return ("isolation 'copy-on-write' needs local kernels; a gateway kernel runs where the gateway puts it, "
                "where neither a view nor a copy of this folder can be given to it. "
                "Start it without isolation, or run it yourself.")
    if not copy and enforced and copy_on_write_problem() is None:
        return Workspace.create(kernel_folders.create(kernel_folders.WORKSPACE_PREFIX), working_dir)
    try:
        return Workspace.create_copy(working_dir, copy_limit)
    except FolderTooLargeToCopy as exc:
        return f"isolation 'copy-on-write' could not be given: {exc}."
    except OSError as exc:
        return f"isolation 'copy-on-write' could not be given: the private copy of the folder failed ({exc})."


async def settle(
    workspace: Workspace, child_id: str, call_id: str, result: tuple[str, bool], emit: Emit, ask: AskGate | None,
    journal: Journal, keep_in: Path | None = None,
) -> tuple[str, bool]:
    """Decide the ended child's change set; returns its `task` result with what became of its changes.

    What is not applied is kept in `keep_in` (the session's `changes/<agent id>/`), else left in the workspace.
    """
    text, is_error = result
    workspace.agent_id = child_id
    changes = await asyncio.to_thread(workspace.read_changes)
    if not changes:
        workspace.remove()
        return text + "\n\n[Its workspace: no files changed.]", is_error
    mark_conflicts(changes)
    if ask is None:
        return text + await _kept(workspace, changes, "nobody could be asked to apply them", keep_in), is_error
    arguments: dict[str, Any] = {"agent_id": child_id, "files": [c.summary() for c in changes.changes]}
    request = await ask(APPLY_CHANGES, arguments, f"{call_id}/{APPLY_CHANGES}", emit, changes=changes)
    if not request.decision:
        why = f"the user rejected them ({request.reason})" if request.reason else "they were not approved"
        return text + await _kept(workspace, changes, why, keep_in), is_error
    report = await asyncio.to_thread(apply_changes, changes, journal)
    where = ""
    if report.by_outcome("failed") or report.by_outcome("skipped"):
        left = [f.path for f in report.files if f.outcome in ("failed", "skipped")]
        changes.changes = [c for c in changes.changes if c.path in left]
        where = f" What was not applied is kept in {await _keep(workspace, changes, keep_in)}."
    else:
        workspace.remove()
    return text + f"\n\n[Its changes, applied to the working folder:]\n{report.text()}{where}", is_error


async def _kept(workspace: Workspace, changes: ChangeSet, why: str, keep_in: Path | None) -> str:
    listing = changes.summary()
    where = await _keep(workspace, changes, keep_in)
    return (f"\n\n[Its changes were not applied: {why}. The working folder is as it was; its versions are kept in "
            f"{where}:]\n{listing}")


async def _keep(workspace: Workspace, changes: ChangeSet, keep_in: Path | None) -> str:
    """Keep what was not applied in the session (the workspace goes then); without a session it stays."""
    if keep_in is None:
        return f"{workspace.upper}{os.sep} (while this program runs)"
    try:
        await asyncio.to_thread(keep_changes, changes, keep_in)
    except OSError as exc:
        return f"{workspace.upper}{os.sep} (it could not be kept in the session: {exc})"
    workspace.remove()
    return f"{keep_in}{os.sep}"
