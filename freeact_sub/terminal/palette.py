"""A distinct, stable colour per agent id, and the label every rendered line starts with.

Labels of nested subagents (a subagent's subagent, `max_depth >= 2`) are indented by their
depth, so a grandchild's lines sit visibly under its parent's.
"""

from __future__ import annotations

from rich.text import Text

from .safe_text import clean

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
        self._parents: dict[str, str] = {}

    def set_type(self, agent_id: str, subagent_type: str) -> None:
        """Remember an agent's type: its label shows it where it is not `general` (`agent-3fa2 reviewer`)."""
        if subagent_type and subagent_type != "general":
            self._types[agent_id] = " ".join(clean(subagent_type).split())  # a label is one line

    def set_parent(self, agent_id: str, parent_id: str) -> None:
        """Remember who started a subagent (from its `SubagentStarted`)."""
        self._parents[agent_id] = parent_id

    def parent(self, agent_id: str) -> str | None:
        """The agent that started `agent_id`, if known."""
        return self._parents.get(agent_id)

    def depth(self, agent_id: str) -> int:
        """0 for the main agent (or an agent whose parent is unknown), 1 for its subagents, 2 for theirs, …"""
        depth, seen = 0, {agent_id}
        while (agent_id := self._parents.get(agent_id, "")) and agent_id not in seen:
            depth, seen = depth + 1, seen | {agent_id}
        return depth

    def indent(self, agent_id: str) -> str:
        """Two spaces per level below the main agent's subagents: nested subagents' lines sit under their parents'."""
        return "  " * max(0, self.depth(agent_id) - 1)

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
