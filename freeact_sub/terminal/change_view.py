"""A change set in the terminal: each file numbered with what happened to it, its conflict, and its diff.

The diff is text a kernel wrote: it is shown with `visible()` (controls drawn, never sent to the terminal).
`pick_files` takes the person's numbers (`f` at the question) and leaves the other files out.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console, Group, RenderableType
from rich.syntax import Syntax
from rich.text import Text

from ..workspaces import KEPT_FOLDER, ChangeSet, kept_sets
from .safe_text import visible

__all__ = ["DIFF_LINES_SHOWN", "change_set_view", "pick_files", "print_kept_changes"]

DIFF_LINES_SHOWN = 40
"""The most lines of one file's diff shown at the question (the whole set is in the request)."""


def change_set_view(changes: ChangeSet, code_theme: str) -> RenderableType:
    """The files of `changes`, numbered, each with its diff (cut at `DIFF_LINES_SHOWN` lines)."""
    parts: list[RenderableType] = [Text(f"{len(changes.changes)} file(s) changed by {changes.agent_id}, kept apart "
                                        "until you apply them:", style="dim")]
    for number, change in enumerate(changes.changes, 1):
        head = Text.assemble((f"[{number}] ", "bold"), visible(change.summary().split(" — ")[0]))
        if change.conflict:
            head.append(f"  ⚠ {visible(change.conflict)}", style="yellow")
        parts.append(head)
        if change.diff:
            lines = change.diff.splitlines()
            shown = "\n".join(lines[:DIFF_LINES_SHOWN])
            if len(lines) > DIFF_LINES_SHOWN:
                shown += f"\n… {len(lines) - DIFF_LINES_SHOWN} more lines"
            parts.append(Syntax(visible(shown), "diff", theme=code_theme, background_color="default",
                                word_wrap=True))
    for path in changes.skipped:
        parts.append(Text(f"    {visible(path)}: left out (not a file or link)", style="dim"))
    return Group(*parts)


def pick_files(changes: ChangeSet, typed: str) -> bool:
    """Apply only the files whose numbers are in `typed` (`1 3`, `1,3`); whether any was chosen."""
    numbers = {int(word) for word in typed.replace(",", " ").split() if word.isdigit()}
    for number, change in enumerate(changes.changes, 1):
        change.apply = number in numbers
    return any(change.apply for change in changes.changes)


def print_kept_changes(console: Console, session_folder: Path) -> None:
    """`sessions show`: the change sets of the session that were not applied, and where each is kept."""
    kept = kept_sets(session_folder)
    if not kept:
        return
    console.print(Text(f"\nChange sets not applied, kept until the session is deleted ({len(kept)}):", style="bold"))
    for agent_id, summary in kept:
        console.print(Text(f"  {visible(agent_id)}: {session_folder / KEPT_FOLDER / agent_id}", style="dim"))
        for line in summary.splitlines():
            console.print(Text(f"    {visible(line)}"))
