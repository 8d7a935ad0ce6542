"""A distinct, stable colour per agent id, and the label every rendered line starts with.

Labels of nested subagents (a subagent's subagent, `max_depth >= 2`) are indented by their
depth, so a grandchild's lines sit visibly under its parent's.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.color import Color, ColorParseError
from rich.text import Text

from .safe_text import clean
from .theme import Theme, theme_for

__all__ = ["Palette"]

_ALIASES = {"orange": "orange1", "pink": "pink1", "purple": "medium_purple1", "gray": "grey50", "grey": "grey50"}
"""Colour names of Claude Code's and OpenCode's agent files that rich spells otherwise."""


def type_colour(name: str | None) -> str | None:
    """A rich colour for an agent type's `color` (`blue`, `orange`, `#5f87ff`), or None for one rich does not know."""
    if not name:
        return None
    name = _ALIASES.get(name.lower(), name.lower())
    try:
        Color.parse(name)
    except ColorParseError:
        return None
    return name


class Palette:
    """Hands out colours in the order agents first appear; an agent keeps its colour for the session.

    An agent whose type has a `color` of its own (`type_colours`, by type name) is drawn in that colour.
    The colours (and the style code is highlighted with, `code_theme`) are the `theme`'s: the
    terminal's background decides (`theme.py`); default dark.
    """

    def __init__(self, type_colours: Mapping[str, str | None] | None = None, theme: Theme | None = None) -> None:
        self.theme = theme or theme_for("dark")
        self._colours: dict[str, str] = {}
        self._types: dict[str, str] = {}
        self._parents: dict[str, str] = {}
        self._type_colours = {k: self.theme.type_colour(c) for k, v in (type_colours or {}).items()
                              if (c := type_colour(v)) is not None}

    @property
    def code_theme(self) -> str:
        """The Pygments style for code to approve, readable on the terminal's background."""
        return self.theme.code_theme

    def set_type(self, agent_id: str, agent_type: str) -> None:
        """Remember an agent's type: its label shows it where it is not `general` (`agent-3fa2 reviewer`)."""
        self.use_type_colour(agent_id, agent_type)
        if agent_type and agent_type != "general":
            self._types[agent_id] = " ".join(clean(agent_type).split())  # a label is one line

    def use_type_colour(self, agent_id: str, agent_type: str) -> None:
        """Draw `agent_id` in its type's own `color`, if the type has one and the agent has no colour yet."""
        if agent_type in self._type_colours and agent_id not in self._colours:
            self._colours[agent_id] = self._type_colours[agent_type]

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
            colours = self.theme.agent_colours
            handed_out = sum(1 for c in self._colours.values() if c in colours)
            self._colours[agent_id] = colours[handed_out % len(colours)]
        return self._colours[agent_id]

    def label(self, agent_id: str) -> Text:
        """`agent-3fa2` in the agent's colour, bold, followed by its type where it is not `general`."""
        kind = self._types.get(agent_id)
        return Text(f"{agent_id} {kind}" if kind else agent_id, style=f"bold {self.colour(agent_id)}")

    def tag(self, agent_id: str) -> Text:
        """`[agent-3fa2]` in the agent's colour, bold."""
        return Text(f"[{agent_id}]", style=f"bold {self.colour(agent_id)}")
