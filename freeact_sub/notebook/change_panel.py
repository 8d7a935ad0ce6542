"""`ChangePanel`: a child's change set in the notebook, a diff per file with a checkbox to leave it out.

It sits in the `apply_changes` call's view above the usual Approve / Reject buttons: Approve applies the files
that are ticked (the rest stay as they are in the folder), Reject applies none. A conflict is marked on its file.
Every checkbox has the CSS class `freeact-change-file` (and the file's path as its description).
"""

from __future__ import annotations

import ipywidgets as widgets

from ..workspaces import ChangeSet, FileChange
from . import _html

__all__ = ["ChangePanel"]


class ChangePanel(widgets.VBox):
    """The files of `changes`, each with a checkbox (ticked: applied when the request is approved) and its diff."""

    def __init__(self, changes: ChangeSet) -> None:
        self.changes = changes
        self.boxes: list[widgets.Checkbox] = []
        rows: list[widgets.Widget] = [widgets.HTML(
            f'<span class="freeact-meta">{len(changes.changes)} file(s) changed by '
            f"{_html.escape(changes.agent_id)}, kept apart until applied; untick a file to leave it out</span>")]
        for change in changes.changes:
            box = widgets.Checkbox(value=change.apply, description=change.path, indent=False,
                                   layout=widgets.Layout(width="auto"))
            box.add_class("freeact-change-file")
            box.observe(lambda event, change=change: _choose(change, bool(event["new"])), names="value")
            self.boxes.append(box)
            rows += [box, widgets.HTML(_file_html(change))]
        super().__init__(rows)
        self.add_class("freeact-changes")

    def disable(self) -> None:
        """The request was decided: the choices are final."""
        for box in self.boxes:
            box.disabled = True


def _choose(change: FileChange, apply: bool) -> None:
    change.apply = apply


def _file_html(change: FileChange) -> str:
    summary = change.summary().split(" — ")[0]
    text = f'<span class="freeact-meta">{_html.escape(summary)}</span>'
    if change.conflict:
        text += f' <span class="freeact-reason">⚠ {_html.escape(change.conflict)}</span>'
    if change.diff:
        text += _html.code(change.diff, "diff")
    return text
