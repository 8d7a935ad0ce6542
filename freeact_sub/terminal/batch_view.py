"""A `map_tasks` batch as one live view: a progress bar, the failures, and its rows on demand (`/batch`).

Every event of a batch's row (its start, its child's turns, cells and answers, its end) is kept as that row's state
(`events.batches.BatchTracker`) instead of being printed: the live view shows one progress line per running batch
(done / running / failed, ETA, cost so far), a failed row prints one line for good, the batch's end prints one summary
line, and `/batch` lists each row. A row's question that waits for a person is left to the approval desk, which
names the row.
"""

from __future__ import annotations

import time

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from freeact_sub import AgentEvent, SubagentQueued, SubagentStarted

from ..events.batches import Batch, BatchRow, BatchTracker
from .palette import Palette
from .safe_text import clean
from .status import format_cost
from .wording import one_line, seconds

__all__ = ["Batches"]

_NUMBERS = ("row", "elapsed", "turns", "tokens", "cost")
_STATE_STYLE = {"done": "green", "failed": "red", "rejected": "yellow", "cancelled": "yellow", "turn_limit": "yellow"}


class Batches:
    """The batches of a session: which events they take, what they print, their live and detailed views."""

    def __init__(self, palette: Palette) -> None:
        self._palette = palette
        self.tracker = BatchTracker()

    def take(self, event: AgentEvent) -> list[Text] | None:
        """The lines to print for an event of a batch (often none), each one screen line when printed with
        `no_wrap`; None if the event is not a batch's (or is its question: shown like any question)."""
        update = self.tracker.take(event)
        if update is None or update.what == "asked":
            return None
        if update.what == "ended":
            return [self._summary(update.batch)]
        if isinstance(event, SubagentQueued | SubagentStarted):  # its colour and place, for /batch and questions
            self._palette.set_type(event.subagent_id, event.agent_type)
            self._palette.set_parent(event.subagent_id, event.agent_id)
        if update.what == "failed" and update.row is not None:
            return [self._failure(update.batch, update.row)]
        return []

    def settle(self) -> None:
        """A new turn starts: a batch the last turn left unended (it was cancelled) leaves the live view."""
        for batch in self.tracker.batches.values():
            if batch.ended is None:
                batch.ended = time.time()

    def row_name(self, agent_id: str) -> str | None:
        """`row 3 of 50` for an agent that works for a row of a batch, else None."""
        owner = self.tracker.owner(agent_id)
        return f"row {owner[1].number} of {owner[0].count}" if owner else None

    # -- views ----------------------------------------------------------------------------

    def live(self, width: int) -> list[RenderableType]:
        """One progress line per batch still running, for the live view."""
        batches = self.tracker.batches.values()
        return [self._progress(b, width) for b in batches if b.ended is None and b.rows]

    def table(self, which: str = "", width: int = 80) -> RenderableType:
        """`/batch`: each row of the last batch (or the batch whose id ends with `which`), fitted to `width`."""
        batches = list(self.tracker.batches.values())
        chosen = [b for b in batches if b.call_id.endswith(which)] if which else []
        batch = chosen[-1] if chosen else batches[-1] if batches else None
        if batch is None:
            return Text("No batch in this session yet (a cell's `map_tasks` starts one).", style="dim")
        head = Text(f"{_title(batch)} · {_counts(batch)}", style="bold")
        head.truncate(width, overflow="ellipsis")
        table = Table(box=None, pad_edge=False, show_edge=False)
        for name in ("row", "state", "subagent", "elapsed", "turns", "tokens", "cost", "result"):
            table.add_column(
                name,
                justify="right" if name in _NUMBERS else "left",
                no_wrap=True,
                overflow="ellipsis",
                max_width=max(12, width - 62) if name == "result" else None,
            )
        now = time.time()
        for number in range(1, batch.count + 1):
            row = batch.rows.get(number) or BatchRow(number)
            elapsed = row.elapsed if row.elapsed is not None else now - row.started if row.started else None
            table.add_row(
                str(number),
                Text(row.state.replace("_", " "), style=_STATE_STYLE.get(row.state, "")),
                Text(row.agent_id, style=self._palette.colour(row.agent_id)) if row.agent_id else "",
                seconds(elapsed) if elapsed is not None else "",
                str(row.turns) if row.agent_id else "",
                f"{row.tokens:,}" if row.tokens else "",
                format_cost(row.cost),
                Text(one_line(clean(row.result), 200), style="red" if row.failed else ""),
            )
        return Group(head, table)

    def _progress(self, batch: Batch, width: int) -> RenderableType:
        done, running, failed = batch.counts()
        ended = done + failed
        elapsed = time.time() - (batch.started or time.time())
        eta = f"ETA {seconds(elapsed / ended * (batch.count - ended))}" if ended else "ETA …"
        tokens, cost = batch.usage()
        money = format_cost(cost) if cost is not None else f"{tokens:,} tok"
        counts = Text.assemble(
            (f"{ended}/{batch.count}", "bold"),
            f" · {done} done · {running} running · ",
            (f"{failed} failed", "red" if failed else ""),
            f" · {eta} · {money}",
        )
        bar_width = max(10, min(30, width - counts.cell_len - 1))
        line = Table.grid(padding=(0, 1), expand=True)  # the bar keeps its width; the counts give way
        line.add_column(width=bar_width, no_wrap=True)
        line.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        line.add_row(ProgressBar(total=batch.count, completed=ended, width=bar_width), counts)
        head = Text.assemble(self._palette.label(batch.agent_id), (f" ▸ {_title(batch)}", "dim"))
        hint = Text("  /batch lists the rows", style="dim")
        head.truncate(max(width - hint.cell_len, 20), overflow="ellipsis")
        return Group(Text.assemble(head, hint) if head.cell_len + hint.cell_len <= width else head, line)

    def _failure(self, batch: Batch, row: BatchRow) -> Text:
        who = Text(row.agent_id, style=self._palette.colour(row.agent_id)) if row.agent_id else Text("")
        return Text.assemble(
            self._palette.label(batch.agent_id),
            ("  ✗ ", "red"),
            f"row {row.number} ",
            who,
            (f" {row.state.replace('_', ' ')}: ", "red"),
            Text(one_line(clean(row.result), 200), style="red"),
        )

    def _summary(self, batch: Batch) -> Text:
        end = batch.ended or time.time()
        took = seconds(end - (batch.started or end))
        return Text.assemble(
            self._palette.label(batch.agent_id),
            ("  ■ ", "red" if batch.counts()[2] else "green"),
            f"batch of {batch.count} ended in {took}: {_counts(batch, running=False)}",
            ("  (/batch lists the rows)", "dim"),
        )


def _title(batch: Batch) -> str:
    return f"batch of {batch.count} · {one_line(clean(batch.template), 60)}"


def _counts(batch: Batch, *, running: bool = True) -> str:
    done, now_running, failed = batch.counts()
    tokens, cost = batch.usage()
    money = format_cost(cost) if cost is not None else f"{tokens:,} tokens"
    return f"{done} done · " + (f"{now_running} running · " if running else "") + f"{failed} failed · {money}"
