"""A `map_tasks` batch in the notebook: one card under its question, with a progress bar and a table of its rows.

Each row is one line (its number, its own input, state, elapsed, tokens and cost, the first line of its answer or
error) with its full card, the row's `task` call and its child's panel, folded under it until the person opens it.
A row whose child asks a person a question opens by itself and stays open; rows are added in the order of the items
and never reordered, so nothing above a waiting question moves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import ipywidgets as widgets

from freeact_sub import AgentEvent, ApprovalRequest

from ..events.batches import Batch, BatchRow, BatchTracker, BatchUpdate, batch_row, row_input
from . import _html
from .panel_header import format_seconds


class _Panel(Protocol):
    """What a batch card needs of the panel of the agent whose cell started the batch (an `AgentPanel`)."""

    calls: dict[str, Any]
    batch_cards: dict[str, BatchCard]


__all__ = ["BatchCard", "BatchCards"]

_STYLE = """<style>
.freeact-batch-row { display: grid; grid-template-columns: 3em minmax(6em, 14em) 6em 5em 9em minmax(8em, 1fr);
  gap: 0 .6em; align-items: baseline; font-size: 90%; white-space: nowrap; }
.freeact-batch-row > span { overflow: hidden; text-overflow: ellipsis; }
.freeact-batch-row .freeact-batch-n { text-align: right; font-weight: bold; }
.freeact-batch-row[data-state="done"] .freeact-batch-state { color: var(--jp-success-color1, green); }
.freeact-batch-row[data-state="failed"] .freeact-batch-state,
.freeact-batch-row[data-state="failed"] .freeact-batch-result { color: var(--jp-error-color1, #c00); }
.freeact-batch-details { margin-left: 2em; }
</style>"""


class _RowView(widgets.VBox):
    """One row: a line that sums it up and, folded under it, its full card."""

    def __init__(self, number: int) -> None:
        super().__init__()
        self.number = number
        self.toggle = widgets.Button(
            icon="chevron-right",
            tooltip=f"Open row {number}'s card (its call and subagent)",
            layout=widgets.Layout(width="auto"),
        )
        self.toggle.add_class("freeact-batch-toggle")
        self.toggle.on_click(lambda _: self.expand(not self.expanded))
        self.line = widgets.HTML()
        self.details = widgets.VBox(layout=widgets.Layout(display="none"))
        self.details.add_class("freeact-batch-details")
        line = widgets.HBox([self.toggle, self.line])
        line.add_class("freeact-batch-line")
        self.children = (line, self.details)
        self.add_class("freeact-batch-row-view")

    @property
    def expanded(self) -> bool:
        return self.details.layout.display != "none"

    @property
    def folded(self) -> bool:
        """Whether its card is folded (a saved notebook's static copy folds it too)."""
        return not self.expanded

    def expand(self, expanded: bool = True) -> None:
        self.details.layout.display = None if expanded else "none"
        self.toggle.icon = "chevron-down" if expanded else "chevron-right"


class BatchCard(widgets.VBox):
    """The card of one batch: progress, counts, and its rows (each with its full card folded under it)."""

    def __init__(self, batch: Batch) -> None:
        super().__init__()
        self.batch = batch
        self.progress = widgets.IntProgress(value=0, min=0, max=max(batch.count, 1), layout=widgets.Layout(width="40%"))
        self.progress.add_class("freeact-batch-progress")
        self.counts = widgets.HTML()
        self.rows: dict[int, _RowView] = {}
        self._rows = widgets.VBox()
        self._rows.add_class("freeact-batch-rows")
        head = widgets.HBox([self.progress, self.counts])
        head.add_class("freeact-batch-head")
        self.children = (widgets.HTML(_STYLE), head, self._rows)
        self.add_class("freeact-batch")
        self.update(None)

    def row(self, number: int) -> _RowView:
        """The view of row `number`, made when it first shows (rows come in the order of the items)."""
        view = self.rows.get(number)
        if view is None:
            view = self.rows[number] = _RowView(number)
            self._rows.children = (*self._rows.children, view)
            self._show(self.batch.row(number))
        return view

    def add_call(self, number: int, call: widgets.Widget) -> None:
        """A row's `task` call (its child's panel comes inside it): folded under the row's line."""
        details = self.row(number).details
        details.children = (*details.children, call)

    def update(self, row: BatchRow | None) -> None:
        """Show what changed: the counts, and `row` if given."""
        batch = self.batch
        done, running, failed = batch.counts()
        self.progress.value = done + failed
        self.progress.bar_style = "danger" if failed else "success" if batch.ended is not None else ""
        tokens, cost = batch.usage()
        money = f" · ${cost:.4f}" if cost is not None else ""
        eta = ""
        if batch.ended is None and batch.started is not None and done + failed:
            left = (time.time() - batch.started) / (done + failed) * (batch.count - done - failed)
            eta = f" · ETA {format_seconds(left)}"
        took = f" · took {format_seconds(batch.ended - batch.started)}" if batch.ended and batch.started else ""
        self.counts.value = (
            f'<span class="freeact-batch-counts"><b>{done + failed}/{batch.count}</b> · {done} done · '
            f"{running} running · {failed} failed{eta}{took} · {tokens:,} tokens{money}</span>"
        )
        if row is not None:
            self.row(row.number)
            self._show(row)

    def tick(self) -> None:
        """Advance the clocks of the rows still running."""
        if self.batch.ended is None:
            for row in self.batch.rows.values():
                if row.state == "running":
                    self._show(row)
            self.update(None)

    def _show(self, row: BatchRow) -> None:
        view = self.rows.get(row.number)
        if view is None:
            return
        elapsed = row.elapsed if row.elapsed is not None else time.time() - row.started if row.started else None
        own = row_input(self.batch.template, row.prompt) if row.prompt else ""
        cost = f" · ${row.cost:.4f}" if row.cost is not None else ""
        result = " ".join(row.result.split())[:300]
        value = (
            f'<div class="freeact-batch-row" data-state="{row.state}" data-row="{row.number}">'
            f'<span class="freeact-batch-n">{row.number}</span>'
            f'<span class="freeact-batch-input" title="{_html.escape(row.prompt)}">{_html.escape(own)}</span>'
            f'<span class="freeact-batch-state">{row.state.replace("_", " ")}</span>'
            f"<span>{_seconds(elapsed) if elapsed is not None else ''}</span>"
            f"<span>{f'{row.tokens:,} tok{cost}' if row.tokens else ''}</span>"
            f'<span class="freeact-batch-result" title="{_html.escape(result)}">{_html.escape(result)}</span></div>'
        )
        if view.line.value != value:
            view.line.value = value


def _seconds(value: float) -> str:
    return f"{value:.1f}s" if value < 10 else format_seconds(value)


class BatchCards:
    """The batch cards of one run: fed every event before and after the agents' panels show it."""

    def __init__(self, panel_of: Callable[[str], _Panel]) -> None:
        self.tracker = BatchTracker()
        self.cards: dict[str, BatchCard] = {}
        """By the call id of the batch's question."""
        self._panel_of = panel_of

    def before(self, event: AgentEvent) -> BatchUpdate | None:
        """Note the event (before a panel shows it): what it changed of a batch."""
        return self.tracker.take(event)

    def after(self, event: AgentEvent, update: BatchUpdate | None) -> None:
        """Show what the event changed (after its panel showed it): a new card, a row, a row's question opened."""
        if update is not None and update.what == "asked":
            panel = self._panel_of(update.batch.agent_id)
            question = panel.calls.get(update.batch.call_id)
            if question is not None and update.batch.call_id not in self.cards:
                card = self.cards[update.batch.call_id] = BatchCard(update.batch)
                panel.batch_cards[update.batch.call_id] = card
                question.attach_subagent(card)
        elif update is not None and (shown := self.cards.get(update.batch.call_id)) is not None:
            shown.update(update.row)
        if isinstance(event, ApprovalRequest) and not event.decided:  # a row's question: its row opens, and stays
            owner = self.tracker.owner(event.agent_id)
            found = (owner[0].call_id, owner[1].number) if owner else batch_row(event.tool_call_id)
            if found is not None and (asking := self.cards.get(found[0])) is not None:
                asking.row(found[1]).expand()

    def tick(self) -> None:
        for card in self.cards.values():
            card.tick()
