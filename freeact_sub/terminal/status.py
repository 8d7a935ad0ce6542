"""The live status of the subagents of the running turn: id, type, model, state, elapsed time, turns used,
tokens and cost."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from decimal import Decimal

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from freeact_sub import SubagentInfo, TreeUsage, Usage

from .palette import Palette

__all__ = ["SubagentBoard", "agents_table", "format_cost", "usage_report"]

_FINISHED_STYLE = {
    "done": "green",
    "failed": "red",
    "cancelled": "yellow",
    "turn_limit": "yellow",
    "rejected": "yellow",
}


@dataclass
class _Row:
    agent_id: str
    max_turns: int
    agent_type: str = "general"
    model: str = ""
    started: float = field(default_factory=time.monotonic)
    state: str = "starting"
    turns: int = 0
    elapsed: float | None = None
    """Set when the subagent has finished."""
    tokens: int = 0
    cost: Decimal | None = None
    parent_id: str | None = None
    retry_until: float | None = None
    """While a model request waits to be retried: when it is sent again (`time.time()`; the state counts down)."""

    @property
    def finished(self) -> bool:
        return self.elapsed is not None


class SubagentBoard:
    """What each subagent of the current turn is doing; a rich table while any exists."""

    def __init__(self, palette: Palette) -> None:
        self._palette = palette
        self._rows: dict[str, _Row] = {}
        self._others_tokens = 0
        """Tokens of agents without a row (the main agent) this turn: they count in the total."""
        self._others_cost: Decimal | None = None

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._rows

    def clear(self) -> None:
        self._rows.clear()
        self._others_tokens, self._others_cost = 0, None

    def started(
        self, agent_id: str, max_turns: int, *, agent_type: str = "general", model: str = "",
        parent_id: str | None = None,
    ) -> None:
        self._rows[agent_id] = _Row(agent_id, max_turns, agent_type, model, parent_id=parent_id)

    def carry_over(self, live: list[SubagentInfo]) -> None:
        """Rows for subagents still alive from earlier turns (background ones), so a queued row's `waiting for a
        slot` is seen beside the subagents that hold the slots."""
        for info in live:
            if info.agent_id in self._rows:
                continue
            waiting = info.state == "waiting"
            row = _Row(info.agent_id, 0, info.agent_type,
                       parent_id=info.parent_id,
                       state="waiting for a slot" if waiting else f"{info.state} (background)" if info.background
                       else info.state)
            row.started = time.monotonic() - info.elapsed
            row.turns, row.tokens, row.cost = info.turns, info.input_tokens + info.output_tokens, info.cost
            self._rows[info.agent_id] = row

    def queued(self, agent_id: str, *, agent_type: str = "general", parent_id: str | None = None) -> None:
        """A subagent waits for a slot: it shows as `waiting for a slot` until it starts (its clock starts then)."""
        self._rows[agent_id] = _Row(agent_id, 0, agent_type, parent_id=parent_id, state="waiting for a slot")

    def _in_tree_order(self) -> list[tuple[_Row, int]]:
        """The rows with their nesting level: each subagent right below its parent, children in start order."""
        rows = self._rows
        ordered: list[tuple[_Row, int]] = []

        def add(row: _Row, level: int) -> None:
            ordered.append((row, level))
            for child in rows.values():
                if child.parent_id == row.agent_id and child is not row:
                    add(child, level + 1)

        for row in rows.values():
            if row.parent_id not in rows:  # a subagent of the main agent (or one whose parent is not shown)
                add(row, 0)
        return ordered

    def set_state(self, agent_id: str, state: str) -> None:
        row = self._rows.get(agent_id)
        if row is not None and not row.finished:
            row.state = state
            row.retry_until = None

    def retrying(self, agent_id: str, until: float, note: str) -> None:
        """A model request of the subagent waits until `until` (`time.time()`) to be sent again: `retrying in 4 s ·
        attempt 2/6 · …`, counting down, then `thinking` again."""
        row = self._rows.get(agent_id)
        if row is not None and not row.finished:
            row.state, row.retry_until = note, until

    def turn(self, agent_id: str, turn: int) -> None:
        row = self._rows.get(agent_id)
        if row is not None and not row.finished:
            row.turns = turn
            row.state, row.retry_until = "thinking", None

    def finished(self, agent_id: str, status: str, turns_used: int, elapsed: float) -> None:
        row = self._rows.get(agent_id)
        if row is None:
            return
        row.state, row.turns, row.elapsed = status, turns_used, elapsed

    def usage(self, agent_id: str, tokens: int, cost: Decimal | None) -> None:
        """Add one model response's tokens (and cost, if known) to a subagent's row."""
        row = self._rows.get(agent_id)
        if row is None:  # the main agent: no row, but its tokens count in the total
            self._others_tokens += tokens
            if cost is not None:
                self._others_cost = (self._others_cost or Decimal(0)) + cost
            return
        row.tokens += tokens
        if cost is not None:
            row.cost = (row.cost or Decimal(0)) + cost

    @property
    def running(self) -> int:
        return sum(1 for row in self._rows.values() if not row.finished)

    def render(self) -> RenderableType | None:
        """The status table, or None when the turn has no subagents."""
        if not self._rows:
            return None
        now = time.monotonic()
        ordered = self._in_tree_order()
        rows = [row for row, _ in ordered]
        cells: list[list[RenderableType]] = []
        for row, level in ordered:
            name = Text(row.agent_id, style=f"bold {self._palette.colour(row.agent_id)}")
            if level:
                name = Text.assemble("  " * (level - 1) + "└ ", name)
            elapsed = row.elapsed if row.elapsed is not None else now - row.started
            style = _FINISHED_STYLE.get(row.state, "red") if row.finished else ""
            state = Text(row.state.replace("_", " ") if row.finished else row.state, style=style)  # a tool keeps its _
            if row.retry_until is not None and not row.finished:
                left = row.retry_until - time.time()
                shown = f"retrying in {max(left, 0):.0f} s · {row.state}" if left > 0 else "thinking"
                state = Text(shown, style="yellow" if left > 0 else "")
            cells.append([
                name,
                row.agent_type,
                Text(row.model, style="dim"),
                state,
                f"{elapsed:.1f} s",
                f"{row.turns}/{row.max_turns}" if row.max_turns else str(row.turns),  # carried over: no limit known
                f"{row.tokens:,}",
                format_cost(row.cost),
            ])
        # the total is the turn's, the main agent's requests (most of the tokens) included
        costs = [cost for cost in (*(row.cost for row in rows), self._others_cost) if cost is not None]
        tokens = sum(row.tokens for row in rows) + self._others_tokens
        total: list[RenderableType] = [Text("total", style="dim"), "", "", "", "", "", f"{tokens:,}",
                                       format_cost(sum(costs, Decimal(0)) if costs else None)]
        return _SubagentTable(("subagent", "type", "model", "state", "elapsed", "turns", "tokens", "cost"),
                              [*cells, total], last_row_style="dim")


_NUMBERS = ("elapsed", "turns", "tokens", "cost")
_IDS = ("subagent", "parent")
_WORDS = ("state", "type", "model", "parent", "sandbox")
"""The columns that may give way, the most needed first: the state gets the room before the type, the type before the
model; `/agents`' parent (the indent shows it too) and sandbox (long, the same for most rows) go first."""
_SHORTEST = 8
"""A word column given fewer cells than this (or than its longest word) is left out rather than cut to `gen…`."""


class _SubagentTable:
    """A subagent table fitted to the terminal when it is drawn: ids and numbers are never cut or wrapped, and
    neither is the state while any room is left for it. In a narrow terminal the model, then the type, are cut
    with an ellipsis, then left out; a state that does not fit even so goes on over a second line."""

    def __init__(self, columns: tuple[str, ...], rows: list[list[RenderableType]], last_row_style: str = "") -> None:
        self.columns, self.rows, self.last_row_style = columns, rows, last_row_style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = [max([len(name), *(_width(row[i]) for row in self.rows)]) for i, name in enumerate(self.columns)]
        shown, limits, gap = _fit(self.columns, widths, options.max_width)
        table = Table(box=None, show_header=True, header_style="dim", padding=(0, gap, 0, 0), pad_edge=False)
        for index in shown:
            name = self.columns[index]
            if name in _NUMBERS:
                table.add_column(name, justify="right", no_wrap=True, min_width=widths[index])
            elif index not in limits or name in _IDS:  # an id
                table.add_column(name, no_wrap=True, min_width=widths[index])
            elif name == "state" and limits[index] < widths[index]:  # on over lines, never cut
                table.add_column(name, overflow="fold", width=max(limits[index], 1))
            else:
                table.add_column(name, no_wrap=True, overflow="ellipsis", max_width=max(limits[index], 1))
        for number, row in enumerate(self.rows):
            table.add_row(*(row[i] for i in shown), style=self.last_row_style if number == len(self.rows) - 1 else "")
        yield table


def _fit(columns: tuple[str, ...], widths: list[int], max_width: int) -> tuple[list[int], dict[int, int], int]:
    """Which columns to show in `max_width` cells, how many cells each word column gets, and the gap between
    columns (two cells; one when that keeps the state on one line)."""
    words = sorted((i for i, name in enumerate(columns) if name in _WORDS), key=lambda i: _WORDS.index(columns[i]))
    tried: list[tuple[list[int], dict[int, int], int]] = []
    for gap in (2, 1):
        shown = list(range(len(columns)))
        while True:
            fixed = sum(widths[i] for i in shown if i not in words) + gap * (len(shown) - 1)
            room = max(max_width - fixed, 1)
            limits: dict[int, int] = {}
            for i in (i for i in words if i in shown):
                limits[i] = min(widths[i], room)
                room -= limits[i]
            starved = [i for i in limits if columns[i] != "state"  # an id is shown whole or not at all
                       and limits[i] < (widths[i] if columns[i] in _IDS else min(widths[i], _SHORTEST))]
            if not starved:
                break
            shown.remove(starved[-1])  # the least needed of them: the others may fit in the room it leaves
        state = next((i for i in limits if columns[i] == "state"), None)
        if state is None or limits[state] == widths[state]:
            return shown, limits, gap
        tried.append((shown, limits, gap))
    return tried[0]  # the state goes on over lines: with the wider gap, as the rest of the table has it


def _width(cell: RenderableType) -> int:
    return Text(cell).cell_len if isinstance(cell, str) else cell.cell_len if isinstance(cell, Text) else 0


def format_cost(cost: Decimal | None) -> str:
    """`$0.0123`, or `–` when the model's price is unknown."""
    return "–" if cost is None else f"${cost:.4f}"


def usage_report(usage: TreeUsage, main_id: str) -> str:
    """The tree's usage as lines of plain text: the total, then each agent (the one-shot mode prints it on stderr)."""

    def line(name: str, used: Usage) -> str:
        cost = format_cost(used.cost) if used.cost is not None else "cost unknown"
        if used.cost is not None and used.unpriced_requests:
            cost += f" (+{used.unpriced_requests} unpriced)"
        requests = f"{used.requests} model request{'s' if used.requests != 1 else ''}"
        if used.retries:
            requests += f" ({used.retries} retr{'y' if used.retries == 1 else 'ies'})"
        return (f"{name}: {requests}, {used.input_tokens:,} input + "
                f"{used.output_tokens:,} output tokens, {cost}")

    lines = [line("usage", usage.total)]
    if len(usage.by_agent) > 1:
        for agent_id, used in usage.by_agent.items():
            lines.append(line(f"  {agent_id}{' (main)' if agent_id == main_id else ''}", used))
    return "\n".join(lines)


def agents_table(agents: list[SubagentInfo], palette: Palette) -> RenderableType:
    """`/agents`: every live subagent of the tree with its id, parent, type, state, turns, elapsed, tokens, cost, and
    its sandbox (profile, hosts, limits)."""
    if not agents:
        return Text("No subagents are running.", style="dim")
    parents = {info.agent_id: info.parent_id for info in agents}
    cells: list[list[RenderableType]] = []
    for info in agents:
        shown = "waiting for a slot" if info.state == "waiting" else info.state
        state = shown + (" (background)" if info.background else "")
        depth, parent = 0, info.parent_id
        while parent in parents and depth < len(parents):  # a subagent's subagent is indented under it
            depth, parent = depth + 1, parents[parent]
        name = Text.assemble("  " * depth, palette.label(info.agent_id))
        cells.append([name, palette.label(info.parent_id), info.agent_type, state,
                      str(info.turns), f"{info.elapsed:.0f} s", f"{info.input_tokens + info.output_tokens:,}",
                      format_cost(info.cost), info.sandbox])
    return _SubagentTable(("subagent", "parent", "type", "state", "turns", "elapsed", "tokens", "cost", "sandbox"),
                          cells)
