"""A cell's output lines in the terminal: each screen line after its agent's label and a bar, a saved image's
path never folded, and the line a cell has not ended yet kept until it does."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.text import Text

from .gutter import Gutter
from .palette import Palette
from .safe_text import ansi_text
from .wording import PLAIN_PATH, SAVED_IMAGE, near

__all__ = ["MARKER_WIDTH", "CellLines"]

MARKER_WIDTH = 6
"""Columns the marker of an item takes after an agent's label."""


class CellLines:
    """The output of running cells, per call, printed line by line."""

    def __init__(self, console: Console, palette: Palette, refresh: Callable[[], None]) -> None:
        self.console = console
        self.palette = palette
        self._refresh = refresh
        self._open_lines: dict[str, tuple[str, str]] = {}
        """Per cell (tool call id): its agent and the output line not yet ended by a newline."""
        self.shown_images: set[str] = set()
        """The saved images whose line was printed already (from the cell's own output)."""

    def clear(self) -> None:
        """Forget unfinished lines (a new turn starts; the last may have failed)."""
        self._open_lines.clear()

    def add(self, agent: str, call_id: str, text: str) -> None:
        """More output of a cell: its complete lines are printed, the rest waits for its newline."""
        _, pending = self._open_lines.get(call_id, (agent, ""))
        *complete, rest = (pending + text).split("\n")
        self.print_lines(agent, complete)
        self._open_lines[call_id] = (agent, rest)

    def end(self, agent: str, call_id: str) -> None:
        """The cell ended: its last line, if it had not ended it."""
        _, rest = self._open_lines.pop(call_id, (agent, ""))
        self.print_lines(agent, [rest] if rest else [])

    def flush(self) -> None:
        """Print every unfinished line (something else is about to be printed)."""
        for call_id, (agent, rest) in list(self._open_lines.items()):
            if rest:
                self.print_lines(agent, [rest])
            del self._open_lines[call_id]

    def print_lines(self, agent: str, lines: list[str]) -> None:
        """Print output lines, each screen line (a folded one too) after the agent's label and its bar; one
        Text for all, as a cell may print thousands. A saved image's path is never folded (see `_image_line`)."""
        if not lines:
            return
        gutter = Text.assemble(
            self.palette.indent(agent), self.palette.label(agent), " " * MARKER_WIDTH,
            ("│", self.palette.colour(agent)), " "
        )
        block = Text(overflow="fold")
        for line in lines:
            saved = SAVED_IMAGE.fullmatch(line)
            if saved is not None:
                self.shown_images.add(saved.group(1))
                shown = near(saved.group(1))
                if PLAIN_PATH.fullmatch(shown):
                    if block:
                        self.console.print(Gutter(block, gutter))
                        block = Text(overflow="fold")
                    self._image_line(gutter, shown)
                    continue
            if block:
                block.append("\n")
            block.append_text(ansi_text(line))
        if block:
            self.console.print(Gutter(block, gutter))
        self._refresh()

    def _image_line(self, gutter: Text, path: str) -> None:
        """`[image saved: PATH]` on one screen line, PATH relative to this folder when it is in it. A PATH too long
        for the line goes on a line of its own, left to the terminal to wrap (no line break is written in it), so
        it is copied whole; it is only letters, digits and `._/~+-`, so it cannot pass for one of the CLI's lines."""
        line = Text.assemble(gutter, "[image saved: ", path, "]")
        if line.cell_len <= self.console.width:
            self.console.print(line, soft_wrap=True)
            return
        self.console.print(Text.assemble(gutter, "[image saved, its path on the next line]"), soft_wrap=True)
        self.console.print(Text(path), soft_wrap=True)
