"""A block of untrusted text drawn behind a prefix on every screen line it takes.

The CLI's own lines start with an agent's label at the left edge; text a cell, a tool or the model
wrote never does. `Gutter` renders its body to the width left after the prefix and puts the prefix
in front of every line, wrapped and folded ones included, so such text cannot begin a screen line
and so cannot pass for one of the CLI's lines (an approval, a rule's decision), however it is made.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from rich.text import Text

__all__ = ["Gutter"]


class Gutter:
    """`body` with `first` before its first screen line and `rest` (default: `first`) before every other.

    `first` and `rest` should be as wide as each other, so the body's lines align.
    """

    def __init__(self, body: RenderableType, first: Text, rest: Text | None = None) -> None:
        self.body = body
        self.first = first
        self.rest = rest if rest is not None else first

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(options.max_width - max(self.first.cell_len, self.rest.cell_len), 1)
        lines = console.render_lines(self.body, options.update(width=width, height=None), pad=False) or [[]]
        first = list(self.first.render(console))
        rest = list(self.rest.render(console))
        new_line = Segment.line()
        for index, line in enumerate(lines):
            yield from first if index == 0 else rest
            yield from line
            yield new_line
