"""`RewindPanel`: the turns of an agent in the notebook, each with a "Rewind to here" button.

```python
from freeact_sub.notebook import RewindPanel

RewindPanel(agent)  # the cell shows the list; a click rewinds (files, conversation, a new kernel)
```

A click starts `Agent.rewind` on the notebook's running event loop (it never blocks it: ipykernel 7.4 delivers
clicks while a cell awaits, see DESIGN.md); the panel then says what was restored and lists the turns again,
the undo point among them. `await panel.rewind(number)` does the same from code. Each button has the CSS class
`freeact-rewind`.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import TYPE_CHECKING

import ipywidgets as widgets

from . import _html

if TYPE_CHECKING:
    from .. import Agent, Rewound
    from ..workspaces.checkpoints import Checkpoint

__all__ = ["RewindPanel"]


class RewindPanel(widgets.VBox):
    """The checkpoints of `agent`, one row each (when, which turn, the files it changed) with a rewind button."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.status = widgets.HTML()
        """What the last rewind did (or why it did not)."""
        self.buttons: dict[int, widgets.Button] = {}
        """The "Rewind to here" button of each checkpoint, by its number."""
        self.last: Rewound | None = None
        """The event of the last rewind made here."""
        self._task: asyncio.Task[None] | None = None
        super().__init__()
        self.add_class("freeact-rewinds")
        self.refresh()

    def refresh(self) -> None:
        """List the checkpoints again."""
        points = self.agent.checkpoints()
        self.buttons = {}
        rows: list[widgets.Widget] = []
        if not points:
            why = self.agent.rewinds.off_reason or "no turn has run yet"
            rows.append(widgets.HTML(f'<span class="freeact-meta">Nothing to rewind to: {_html.escape(why)}</span>'))
        for point in points:
            button = widgets.Button(
                description="Rewind to here",
                layout=widgets.Layout(width="auto"),
                tooltip=f"go back to before this turn (checkpoint {point.number})",
            )
            button.add_class("freeact-rewind")
            button.on_click(lambda _, number=point.number: self._clicked(number))
            self.buttons[point.number] = button
            rows.append(widgets.HBox([button, widgets.HTML(_row_html(point))]))
        self.children = [*rows, self.status]

    async def rewind(self, number: int) -> Rewound | None:
        """Rewind the agent to before checkpoint `number`; the event, or None if it could not (the panel says why)."""
        for button in self.buttons.values():
            button.disabled = True
        try:
            self.last = await self.agent.rewind(number)
        except (ValueError, RuntimeError, OSError) as exc:
            self.status.value = f'<span class="freeact-reason">Not rewound: {_html.escape(str(exc))}</span>'
            for button in self.buttons.values():
                button.disabled = False
            return None
        self.status.value = f'<span class="freeact-meta">{_html.escape(self.last.content)}</span>'
        self.refresh()
        return self.last

    @property
    def busy(self) -> bool:
        """Whether a rewind a click started is still under way."""
        return self._task is not None and not self._task.done()

    def _clicked(self, number: int) -> None:
        if self.busy:
            return
        self._task = asyncio.get_running_loop().create_task(self._rewind_quietly(number))

    async def _rewind_quietly(self, number: int) -> None:
        await self.rewind(number)


def _row_html(point: Checkpoint) -> str:
    when = datetime.datetime.fromtimestamp(point.at).strftime("%H:%M:%S")
    what = f"turn {point.turn} of “{point.label}”" if point.kind == "turn" else point.label
    files = ", ".join(point.files) or "no files changed"
    return (
        f'<span class="freeact-meta">{point.number}. {when}</span> {_html.escape(what)}: '
        f'<span class="freeact-meta">{_html.escape(files)}</span>'
    )
