"""A distinct, stable colour per agent id, and the label every rendered line starts with."""

from __future__ import annotations

from rich.text import Text

__all__ = ["Palette"]

_COLOURS = (
    "bright_cyan",
    "bright_magenta",
    "bright_green",
    "bright_yellow",
    "bright_blue",
    "orange1",
    "orchid",
    "spring_green2",
    "deep_sky_blue1",
    "light_salmon1",
)


class Palette:
    """Hands out colours in the order agents first appear; an agent keeps its colour for the session."""

    def __init__(self) -> None:
        self._colours: dict[str, str] = {}
        self._types: dict[str, str] = {}

    def set_type(self, agent_id: str, subagent_type: str) -> None:
        """Remember an agent's type: its label shows it where it is not `general` (`agent-3fa2 reviewer`)."""
        if subagent_type and subagent_type != "general":
            self._types[agent_id] = subagent_type

    def colour(self, agent_id: str) -> str:
        if agent_id not in self._colours:
            self._colours[agent_id] = _COLOURS[len(self._colours) % len(_COLOURS)]
        return self._colours[agent_id]

    def label(self, agent_id: str) -> Text:
        """`agent-3fa2` in the agent's colour, bold, followed by its type where it is not `general`."""
        kind = self._types.get(agent_id)
        return Text(f"{agent_id} {kind}" if kind else agent_id, style=f"bold {self.colour(agent_id)}")

    def tag(self, agent_id: str) -> Text:
        """`[agent-3fa2]` in the agent's colour, bold."""
        return Text(f"[{agent_id}]", style=f"bold {self.colour(agent_id)}")
