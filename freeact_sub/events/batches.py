"""A `map_tasks` batch as its events tell it: which batch and row a call belongs to, and each row's state.

A batch asked as one question (`approve="batch"`) has the call id `<cell call id>/code-tasks-<n>`; each of its rows
runs under `<batch id>/row-<i>` (1-based), and a row asked to correct its answer under `<row id>-fix`. Front ends group
a batch's children under its question by these ids alone, so a saved session groups them as the live view did.

`BatchTracker` reads a stream's events and keeps, per batch, each row's state, turns, tokens, cost, time and the first
line of its answer or error; the terminal, the notebook and the timeline show a batch from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

from .approvals import ApprovalRequest
from .base import AgentEvent
from .model_output import ModelUsage
from .subagents import SubagentFinished, SubagentQueued, SubagentStarted
from .tool_results import ToolOutput
from .turn import TurnStarted

__all__ = [
    "Batch",
    "BatchRow",
    "BatchTracker",
    "BatchUpdate",
    "batch_row",
    "is_batch_call",
    "row_call_id",
    "row_input",
]

_ROW = re.compile(r"^(?P<batch>.+/code-tasks-\d+)/row-(?P<row>\d+)(?:-fix)?$")
_BATCH = re.compile(r"^.+/code-tasks-\d+$")
_ENDS = ("done", "failed", "rejected", "cancelled", "turn_limit")


def row_call_id(batch_id: str, row: int) -> str:
    """The call id of row `row` (1-based) of the batch whose question had the call id `batch_id`."""
    return f"{batch_id}/row-{row}"


def batch_row(call_id: str) -> tuple[str, int] | None:
    """`(batch id, row)` for a row's call id (or its correction's), else None."""
    match = _ROW.match(call_id)
    return (match.group("batch"), int(match.group("row"))) if match else None


def is_batch_call(call_id: str) -> bool:
    """Whether `call_id` is a batch's own question (and end), not one of its rows."""
    return _BATCH.match(call_id) is not None


def row_input(template: str, prompt: str) -> str:
    """What a row's prompt says beyond its template's fixed words: `…'kernel'.` for `Count the letters of the word
    {word!r}.` filled with `kernel` (the whole prompt when the template starts with a field)."""
    head = template.split("{", 1)[0]
    tail = template.rsplit("}", 1)[-1] if "}" in template else ""
    cut_head = len(head) >= 8 and prompt.startswith(head)
    rest = prompt[len(head) :] if cut_head else prompt
    cut_tail = len(tail) >= 8 and rest.endswith(tail) and len(rest) > len(tail)
    rest = rest[: len(rest) - len(tail)] if cut_tail else rest
    return ("…" if cut_head else "") + " ".join(rest.split()) + ("…" if cut_tail else "")


@dataclass
class BatchRow:
    """One row of a batch: its child, where it is, what it used and what it answered."""

    number: int
    """1-based, in the order of the items."""
    state: Literal["waiting", "queued", "running", "done", "failed", "rejected", "cancelled", "turn_limit"] = "waiting"
    agent_id: str = ""
    """The child that runs it (empty until it is queued or started)."""
    prompt: str = ""
    """The template filled with its item, as its child reads it."""
    turns: int = 0
    tokens: int = 0
    cost: Decimal | None = None
    started: float | None = None
    """When its child started (`time.time()`, from the events)."""
    elapsed: float | None = None
    """Seconds its child ran, once it ended."""
    result: str = ""
    """Its answer, or its error (without the `The subagent … failed:` the row's state already says)."""

    @property
    def ended(self) -> bool:
        return self.state in _ENDS

    @property
    def failed(self) -> bool:
        return self.ended and self.state != "done"


@dataclass
class Batch:
    """A batch of rows that one question started."""

    call_id: str
    agent_id: str
    """The agent whose cell started it."""
    template: str
    count: int
    example: str = ""
    rows: dict[int, BatchRow] = field(default_factory=dict)
    started: float | None = None
    """When its first row started (`time.time()`)."""
    ended: float | None = None
    """When its last row came back (the batch's own end)."""

    def row(self, number: int) -> BatchRow:
        return self.rows.setdefault(number, BatchRow(number))

    def counts(self) -> tuple[int, int, int]:
        """Rows done, running, failed (any end but `done` is a failure here)."""
        rows = self.rows.values()
        return (
            sum(r.state == "done" for r in rows),
            sum(r.state == "running" for r in rows),
            sum(r.failed for r in rows),
        )

    def usage(self) -> tuple[int, Decimal | None]:
        """Tokens and cost (None while no price is known) of its rows so far."""
        costs = [r.cost for r in self.rows.values() if r.cost is not None]
        return sum(r.tokens for r in self.rows.values()), sum(costs, Decimal(0)) if costs else None


@dataclass(frozen=True)
class BatchUpdate:
    """What one event changed: a batch was `asked`, a `row` changed (or `failed`), or the batch `ended`."""

    batch: Batch
    row: BatchRow | None
    what: Literal["asked", "row", "failed", "ended"]


class BatchTracker:
    """The batches of one stream, from its events; `take(event)` says what an event changed."""

    def __init__(self) -> None:
        self.batches: dict[str, Batch] = {}
        """By the call id of the batch's question, oldest first."""
        self._owner: dict[str, tuple[Batch, BatchRow]] = {}

    def owner(self, agent_id: str) -> tuple[Batch, BatchRow] | None:
        """The batch and row an agent works for (a row's child, or a subagent it started), else None."""
        return self._owner.get(agent_id)

    def take(self, event: AgentEvent) -> BatchUpdate | None:
        """Note an event; what it changed of a batch, or None if it is no batch's. An undecided question of a row
        (one a person must answer) is no batch's: it is shown like any question."""
        owner = self._owner.get(event.agent_id)
        if owner is not None:
            return self._inside(event, *owner)
        call_id = getattr(event, "tool_call_id", None)
        if not isinstance(call_id, str):
            return None
        if is_batch_call(call_id):
            return self._own(event, call_id)
        found = batch_row(call_id)
        batch = self.batches.get(found[0]) if found else None
        if batch is None or found is None:
            return None
        row = batch.row(found[1])
        if isinstance(event, ApprovalRequest):
            if not event.decided:
                return None
            row.prompt = str(event.tool_args.get("prompt", row.prompt))
            if event.decision is False:
                row.state, row.result = "rejected", " ".join((event.reason or "not approved").split())
                return BatchUpdate(batch, row, "failed")
        elif isinstance(event, SubagentQueued | SubagentStarted):
            row.agent_id = event.subagent_id
            self._owner[event.subagent_id] = (batch, row)
            if isinstance(event, SubagentQueued):
                row.state = "queued"
            else:
                row.state, row.started = "running", row.started or event.at
                batch.started = batch.started or event.at
        elif isinstance(event, SubagentFinished):
            row.turns = max(row.turns, event.turns_used)
            row.elapsed = (row.elapsed or 0.0) + event.elapsed
            if event.status != "done":
                row.state = event.status
        elif isinstance(event, ToolOutput):  # its answer, or its error without the words its state says
            said = f"The subagent {row.agent_id} failed: " if row.agent_id else ""
            row.result = event.content.removeprefix(said) if said else event.content
            if event.is_error:
                row.state = "failed" if not row.ended else row.state
                return BatchUpdate(batch, row, "failed")
            row.state = "done"
        return BatchUpdate(batch, row, "row")

    def _own(self, event: AgentEvent, call_id: str) -> BatchUpdate | None:
        """The batch's question (it is shown as any question) or its end."""
        if isinstance(event, ApprovalRequest):
            count = event.tool_args.get("count")
            if event.tool_name != "task" or isinstance(count, bool) or not isinstance(count, int):
                return None
            example = event.tool_args.get("example")
            batch = self.batches.setdefault(
                call_id,
                Batch(
                    call_id,
                    event.agent_id,
                    str(event.tool_args.get("prompt", "")),
                    count,
                    example if isinstance(example, str) else "",
                ),
            )
            return BatchUpdate(batch, None, "asked")
        ended = self.batches.get(call_id)
        if isinstance(event, ToolOutput) and ended is not None:
            ended.ended = event.at
            return BatchUpdate(ended, None, "ended")
        return None

    def _inside(self, event: AgentEvent, batch: Batch, row: BatchRow) -> BatchUpdate | None:
        """An event of an agent that works for a row: its turns, tokens and cost count for the row."""
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
        return BatchUpdate(batch, row, "row")
