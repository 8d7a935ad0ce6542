"""A child with a workspace of its own: made before it starts, and its change set decided when it ends.

`open_workspace` makes the host-owned folders of a child's copy-on-write view (or says why it cannot be had);
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
    Journal,
    Workspace,
    apply_changes,
    keep_changes,
    mark_conflicts,
    read_changes,
)

__all__ = ["APPLY_CHANGES", "AskGate", "open_workspace", "settle"]

APPLY_CHANGES = "apply_changes"
"""The tool name of the decision to apply a child's change set (rules: `apply_changes: allow`)."""

AskGate = Callable[..., Awaitable[ApprovalRequest]]
"""The parent's `ApprovalGate.ask`."""


def open_workspace(working_dir: Path, *, enforced: bool, local: bool) -> Workspace | str:
    """A new workspace over `working_dir`, or why a child cannot have one here (a sentence for the model)."""
    if not local:
        return ("isolation 'copy-on-write' needs local kernels; a gateway kernel runs where the gateway puts it. "
                "Start it without isolation, or run it yourself.")
    if not enforced:
        return "isolation 'copy-on-write' needs a sandbox profile (this agent runs with the sandbox off)."
    if (problem := copy_on_write_problem()) is not None:
        return f"isolation 'copy-on-write' is not available here: {problem}."
    return Workspace.create(kernel_folders.create("ws-"), working_dir)


async def settle(
    workspace: Workspace, child_id: str, call_id: str, result: tuple[str, bool], emit: Emit, ask: AskGate | None,
    journal: Journal, keep_in: Path | None = None,
) -> tuple[str, bool]:
    """Decide the ended child's change set; returns its `task` result with what became of its changes.

    What is not applied is kept in `keep_in` (the session's `changes/<agent id>/`), else left in the workspace.
    """
    text, is_error = result
    changes = await asyncio.to_thread(read_changes, workspace.upper, workspace.lower, agent_id=child_id,
                                      started_ns=workspace.started_ns)
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
