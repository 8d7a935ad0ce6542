"""A cell's output lines in the terminal: each screen line after its agent's label and a bar, a saved image's
path never folded, and the line a cell has not ended yet kept until it does."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import COLOR_SYSTEMS, Console, ConsoleOptions, RenderResult
from rich.segment import ControlType, Segment
from rich.text import Text

from .palette import Palette
from .safe_text import screen_lines
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
        self._open_lines: dict[str, tuple[str, list[str]]] = {}
        """Per cell (tool call id): its agent and the output line not yet ended by a newline (in the pieces it came
        in: a kernel may send it a character at a time, and joining on each would cost the square of its length)."""
        self.shown_images: set[str] = set()
        """The saved images whose line was printed already (from the cell's own output)."""

    def clear(self) -> None:
        """Forget unfinished lines (a new turn starts; the last may have failed)."""
        self._open_lines.clear()

    def add(self, agent: str, call_id: str, text: str) -> None:
        """More output of a cell: its complete lines are printed, the rest waits for its newline."""
        _, pending = self._open_lines.setdefault(call_id, (agent, []))
        if "\n" not in text:
            pending.append(text)
            return
        *complete, rest = ("".join(pending) + text).split("\n")
        self.print_lines(agent, complete)
        self._open_lines[call_id] = (agent, [rest])

    def end(self, agent: str, call_id: str) -> None:
        """The cell ended: its last line, if it had not ended it."""
        _, pending = self._open_lines.pop(call_id, (agent, []))
        rest = "".join(pending)
        self.print_lines(agent, [rest] if rest else [])

    def flush(self) -> None:
        """Print every unfinished line (something else is about to be printed)."""
        for call_id, (agent, pending) in list(self._open_lines.items()):
            if rest := "".join(pending):
                self.print_lines(agent, [rest])
            del self._open_lines[call_id]

    def print_lines(self, agent: str, lines: list[str]) -> None:
        """Print output lines, each screen line (a folded one too) after the agent's label and its bar. A saved
        image's path is never folded (see `_image_line`). Each line is cut into its screen lines by `screen_lines`
        and written as it is, all in one piece: a cell may print half a million lines, and what a line costs
        must not depend on how it was made (rich's own wrapping costs a few hundred microseconds a line)."""
        if not lines:
            return
        gutter = Text.assemble(
            self.palette.indent(agent), self.palette.label(agent), " " * MARKER_WIDTH,
            ("│", self.palette.colour(agent)), " "
        )
        system = COLOR_SYSTEMS.get(self.console.color_system or "")
        prefix = "".join(
            segment.style.render(segment.text, color_system=system) if segment.style and system else segment.text
            for segment in gutter.render(self.console)
        )
        width = max(self.console.width - gutter.cell_len, 1)
        colours = system is not None
        start = 0
        if any("[image saved: " in line for line in lines):
            for index, line in enumerate(lines):
                saved = SAVED_IMAGE.fullmatch(line)
                if saved is None:
                    continue
                self.shown_images.add(saved.group(1))
                path = near(saved.group(1))
                if PLAIN_PATH.fullmatch(path):
                    self._write(prefix, lines[start:index], width, colours)
                    self._image_line(gutter, path)
                    start = index + 1
        self._write(prefix, lines[start:], width, colours)
        self._refresh()

    def _write(self, prefix: str, lines: list[str], width: int, colours: bool) -> None:
        if lines:
            shown = screen_lines(lines, width, colours=colours)
            self.console.print(_Written(prefix + f"\n{prefix}".join(shown) + "\n", colours), crop=False)

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


class _Written:
    """Screen lines made safe and folded already (`screen_lines`), the gutter's colours included, written as they are.

    With colours they go out the way rich writes its own control codes: `ScreenConsole` cleans every other text
    segment, which would take the colours (and the gutter's) again; these have been through `clean()` and kept
    only SGR sequences of known colours and attributes. Without colours the text holds no control at all.
    """

    def __init__(self, text: str, coloured: bool) -> None:
        self.text = text
        self.coloured = coloured

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # marked as a control segment, which rich writes as it is; the code it names (each line starts at column 0)
        # is only the mark, nothing reads it
        yield Segment(self.text, None, _MARK) if self.coloured else Segment(self.text)


_MARK = [(ControlType.CURSOR_MOVE_TO_COLUMN, 0)]
