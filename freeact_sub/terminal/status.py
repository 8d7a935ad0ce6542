"""The live status of the subagents of the running turn: id, type, model, state, elapsed time, turns used."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from .palette import Palette

__all__ = ["SubagentBoard"]

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
    subagent_type: str = "general"
    model: str = ""
    started: float = field(default_factory=time.monotonic)
    state: str = "starting"
    turns: int = 0
    elapsed: float | None = None
    """Set when the subagent has finished."""

    @property
    def finished(self) -> bool:
        return self.elapsed is not None


class SubagentBoard:
    """What each subagent of the current turn is doing; a rich table while any exists."""

    def __init__(self, palette: Palette) -> None:
        self._palette = palette
        self._rows: dict[str, _Row] = {}

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._rows

    def clear(self) -> None:
        self._rows.clear()

    def started(self, agent_id: str, max_turns: int, *, subagent_type: str = "general", model: str = "") -> None:
        self._rows[agent_id] = _Row(agent_id, max_turns, subagent_type, model)

    def set_state(self, agent_id: str, state: str) -> None:
        row = self._rows.get(agent_id)
        if row is not None and not row.finished:
            row.state = state

    def turn(self, agent_id: str, turn: int) -> None:
        row = self._rows.get(agent_id)
        if row is not None and not row.finished:
            row.turns = turn
            row.state = "thinking"

    def finished(self, agent_id: str, status: str, turns_used: int, elapsed: float) -> None:
        row = self._rows.get(agent_id)
        if row is None:
            return
        row.state, row.turns, row.elapsed = status, turns_used, elapsed

    @property
    def running(self) -> int:
        return sum(1 for row in self._rows.values() if not row.finished)

    def render(self) -> RenderableType | None:
        """The status table, or None when the turn has no subagents."""
        if not self._rows:
            return None
        table = Table(box=None, show_header=True, header_style="dim", padding=(0, 2, 0, 0), pad_edge=False)
        table.add_column("subagent")
        table.add_column("type")
        table.add_column("model")
        table.add_column("state")
        table.add_column("elapsed", justify="right")
        table.add_column("turns", justify="right")
        now = time.monotonic()
        for row in list(self._rows.values()):
            elapsed = row.elapsed if row.elapsed is not None else now - row.started
            style = _FINISHED_STYLE.get(row.state, "red") if row.finished else ""
            state = Text(row.state.replace("_", " "), style=style)
            table.add_row(
                Text(row.agent_id, style=f"bold {self._palette.colour(row.agent_id)}"),
                row.subagent_type,
                Text(row.model, style="dim"),
                state,
                f"{elapsed:.1f} s",
                f"{row.turns}/{row.max_turns}",
            )
        return table
