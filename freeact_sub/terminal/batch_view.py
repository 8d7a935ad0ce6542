"""A `map_tasks` batch as one live view: a progress bar, the failures, and its rows on demand (`/batch`).

A batch asked as one question runs its rows under call ids that name it (`subagents.batch_rows`). `Batches` takes
every event of a row (its start, its own turns, cells and answers, its end) and keeps it as one row's state instead
of printing it: the live view shows one progress line per running batch (done / running / failed, ETA, cost so
far), a failed row prints one line for good, the batch's end prints one summary line, and `/batch` lists each row.
A row's question that waits for a person is left to the approval desk, which names the row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from decimal import Decimal

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from freeact_sub import (
    AgentEvent,
    ApprovalRequest,
    ModelUsage,
    SubagentFinished,
    SubagentQueued,
    SubagentStarted,
    ToolOutput,
    TurnStarted,
)

from ..subagents.batch_rows import batch_row, is_batch_call
from .palette import Palette
from .safe_text import clean
from .status import format_cost
from .wording import one_line, seconds

__all__ = ["Batches"]

_NUMBERS = ("row", "elapsed", "turns", "tokens", "cost")
_STATE_STYLE = {"done": "green", "failed": "red", "rejected": "yellow", "cancelled": "yellow", "turn_limit": "yellow"}


@dataclass
class _Row:
    number: int
    state: str = "waiting"
    agent_id: str = ""
    turns: int = 0
    tokens: int = 0
    cost: Decimal | None = None
    started: float | None = None
    elapsed: float | None = None
    result: str = ""
    """The first line of its answer, or of its error."""

    @property
    def ended(self) -> bool:
        return self.state in _STATE_STYLE


@dataclass
class _Batch:
    call_id: str
    agent_id: str
    template: str
    count: int
    rows: dict[int, _Row] = field(default_factory=dict)
    started: float | None = None
    """When its first row started (`time.time()`, from the events: a replay tells the same times)."""
    ended: float | None = None

    def row(self, number: int) -> _Row:
        return self.rows.setdefault(number, _Row(number))

    def counts(self) -> tuple[int, int, int]:
        """Rows done, running, failed (any end but `done` is a failure here)."""
        done = sum(r.state == "done" for r in self.rows.values())
        failed = sum(r.ended and r.state != "done" for r in self.rows.values())
        running = sum(r.state == "running" for r in self.rows.values())
        return done, running, failed

    def cost(self) -> tuple[int, Decimal | None]:
        costs = [r.cost for r in self.rows.values() if r.cost is not None]
        return sum(r.tokens for r in self.rows.values()), sum(costs, Decimal(0)) if costs else None


class Batches:
    """The batches of a session: which events they take, what they print, their live and detailed views."""

    def __init__(self, palette: Palette) -> None:
        self._palette = palette
        self._batches: dict[str, _Batch] = {}
        self._owner: dict[str, tuple[_Batch, _Row]] = {}
        """Each agent that works for a row (the row's child and any subagent it starts), by agent id."""

    # -- events ---------------------------------------------------------------------------

    def asked(self, request: ApprovalRequest) -> None:
        """A batch's one question was shown: remember the batch (its rows come once it is approved)."""
        count = request.tool_args.get("count")
        if request.tool_name == "task" and is_batch_call(request.tool_call_id) and isinstance(count, int):
            self._batches[request.tool_call_id] = _Batch(
                request.tool_call_id, request.agent_id, str(request.tool_args.get("prompt", "")), count
            )

    def take(self, event: AgentEvent) -> list[Text] | None:
        """The lines to print for an event of a batch (often none), each one screen line when printed with
        `no_wrap`; None if the event is not a batch's."""
        if isinstance(event, ApprovalRequest):
            self.asked(event)
        owner = self._owner.get(event.agent_id)
        if owner is not None:
            return self._inside(event, *owner)
        call_id = getattr(event, "tool_call_id", None)
        if not isinstance(call_id, str):
            return None
        if isinstance(event, ToolOutput) and call_id in self._batches:
            return [self._summary(self._batches[call_id], event.at)]
        found = batch_row(call_id)
        batch = self._batches.get(found[0]) if found else None
        if batch is None or found is None:
            return None
        row = batch.row(found[1])
        if isinstance(event, ApprovalRequest):
            if not event.decided:
                return None  # a hook or rule left it to a person: the desk asks, naming the row
            if event.decision is False:
                row.state, row.result = "rejected", one_line(clean(event.reason or "not approved"), 200)
                return [self._failure(batch, row)]
            return []
        if isinstance(event, SubagentQueued):
            row.agent_id, row.state = event.subagent_id, "queued"
            self._owner[event.subagent_id] = (batch, row)
        elif isinstance(event, SubagentStarted):
            row.agent_id, row.state = event.subagent_id, "running"
            row.started = row.started or event.at
            batch.started = batch.started or event.at
            self._owner[event.subagent_id] = (batch, row)
            self._palette.set_type(event.subagent_id, event.agent_type)
            self._palette.set_parent(event.subagent_id, event.agent_id)
        elif isinstance(event, SubagentFinished):
            row.turns = max(row.turns, event.turns_used)
            row.elapsed = (row.elapsed or 0.0) + event.elapsed
            if event.status != "done":
                row.state = event.status
        elif isinstance(event, ToolOutput):  # its answer, or its error without the words the row line says
            said = f"The subagent {row.agent_id} failed: " if row.agent_id else ""
            content = event.content.removeprefix(said) if said else event.content
            row.result = one_line(clean(content), 200)
            if event.is_error:
                row.state = "failed" if row.state in ("running", "queued", "waiting") else row.state
                return [self._failure(batch, row)]
            row.state = "done"
        return []

    def _inside(self, event: AgentEvent, batch: _Batch, row: _Row) -> list[Text] | None:
        """An event of an agent that works for a row: counted, not printed (a question for a person excepted)."""
        if isinstance(event, ApprovalRequest) and not event.decided:
            return None
        if isinstance(event, TurnStarted) and event.agent_id == row.agent_id:
            row.turns = max(row.turns, event.turn)
        elif isinstance(event, ModelUsage):
            row.tokens += event.input_tokens + event.output_tokens
            if event.cost is not None:
                row.cost = (row.cost or Decimal(0)) + event.cost
        elif isinstance(event, SubagentQueued | SubagentStarted):
            self._owner[event.subagent_id] = (batch, row)  # a row's own subagent works for the row too
        return []

    # -- what a question says -------------------------------------------------------------

    def row_name(self, agent_id: str) -> str | None:
        """`row 3 of 50` for an agent that works for a row of a batch, else None."""
        owner = self._owner.get(agent_id)
        return f"row {owner[1].number} of {owner[0].count}" if owner else None

    # -- views ----------------------------------------------------------------------------

    def live(self, width: int) -> list[RenderableType]:
        """One progress line per batch still running, for the live view."""
        return [self._progress(b, width) for b in self._batches.values() if b.ended is None and b.rows]

    def table(self, which: str = "", width: int = 80) -> RenderableType:
        """`/batch`: each row of the last batch (or the batch whose id ends with `which`), fitted to `width`."""
        chosen = [b for b in self._batches.values() if b.call_id.endswith(which)] if which else []
        batch = chosen[-1] if chosen else next(reversed(self._batches.values()), None)
        if batch is None:
            return Text("No batch in this session yet (a cell's `map_tasks` starts one).", style="dim")
        head = Text(f"{self._title(batch)} · {self._counts(batch)}", style="bold")
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
            row = batch.rows.get(number) or _Row(number)
            elapsed = row.elapsed if row.elapsed is not None else now - row.started if row.started else None
            table.add_row(
                str(number),
                Text(row.state.replace("_", " "), style=_STATE_STYLE.get(row.state, "")),
                Text(row.agent_id, style=self._palette.colour(row.agent_id)) if row.agent_id else "",
                seconds(elapsed) if elapsed is not None else "",
                str(row.turns) if row.agent_id else "",
                f"{row.tokens:,}" if row.tokens else "",
                format_cost(row.cost),
                Text(row.result, style="red" if row.ended and row.state != "done" else ""),
            )
        return Group(head, table)

    def _title(self, batch: _Batch) -> str:
        return f"batch of {batch.count} · {one_line(clean(batch.template), 60)}"

    def _counts(self, batch: _Batch, *, running: bool = True) -> str:
        done, now_running, failed = batch.counts()
        tokens, cost = batch.cost()
        money = format_cost(cost) if cost is not None else f"{tokens:,} tokens"
        return f"{done} done · " + (f"{now_running} running · " if running else "") + f"{failed} failed · {money}"

    def _progress(self, batch: _Batch, width: int) -> RenderableType:
        done, running, failed = batch.counts()
        ended = done + failed
        elapsed = time.time() - (batch.started or time.time())
        eta = f"ETA {seconds(elapsed / ended * (batch.count - ended))}" if ended else "ETA …"
        tokens, cost = batch.cost()
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
        head = Text.assemble(self._palette.label(batch.agent_id), (f" ▸ {self._title(batch)}", "dim"))
        hint = Text("  /batch lists the rows", style="dim")
        head.truncate(max(width - hint.cell_len, 20), overflow="ellipsis")
        return Group(Text.assemble(head, hint) if head.cell_len + hint.cell_len <= width else head, line)

    def _failure(self, batch: _Batch, row: _Row) -> Text:
        who = Text(row.agent_id, style=self._palette.colour(row.agent_id)) if row.agent_id else Text("")
        return Text.assemble(
            self._palette.label(batch.agent_id),
            ("  ✗ ", "red"),
            f"row {row.number} ",
            who,
            (f" {row.state.replace('_', ' ')}: ", "red"),
            Text(row.result, style="red"),
        )

    def _summary(self, batch: _Batch, at: float) -> Text:
        batch.ended = at
        took = seconds(at - (batch.started or at))
        failed = batch.counts()[2]
        return Text.assemble(
            self._palette.label(batch.agent_id),
            ("  ■ ", "red" if failed else "green"),
            f"batch of {batch.count} ended in {took}: {self._counts(batch, running=False)}",
            ("  (/batch lists the rows)", "dim"),
        )
