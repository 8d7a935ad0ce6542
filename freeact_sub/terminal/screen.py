"""The console every terminal surface prints through: no text it writes carries a control character.

`ScreenConsole` is a rich `Console` with one difference in what reaches the terminal: each text
segment it renders goes through `clean()` (controls removed; only newline and tab stay), and
loses any hyperlink or concealed style, so neither a link's hidden target nor hidden text reaches
the screen. Segments rich marks as control codes (the live view's cursor movements) are rich's own
and pass. Console markup and emoji codes are off: a type description or an MCP tool name shown
as it is never becomes a style, a link or a markup error.

The renderers clean untrusted text themselves where it matters how (kernel output keeps its
colours, a carriage return drops what it overwrote, code to approve is shown whole); this console
is the floor under them, for every table, banner and message that prints something it did not write.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.style import Style

from .safe_text import HIDDEN, clean

__all__ = ["ScreenConsole"]

_UNSAFE = re.compile(f"[{HIDDEN}\r]")
_SHOWN = Style(conceal=False)


class ScreenConsole(Console):
    """A rich `Console` whose text segments never carry a control character, a link or concealed text.

    Takes `Console`'s arguments; `markup` and `emoji` default to off.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        kwargs.setdefault("emoji", False)
        super().__init__(**kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """Rich's rendering, with every text segment made safe (see the module's docstring)."""
        for segment in super().render(renderable, options):
            yield segment if segment.control else _safe(segment)


def _safe(segment: Segment) -> Segment:
    text, style, _ = segment
    if _UNSAFE.search(text):
        text = clean(text)
    if style is not None and (style.link or style.conceal):
        style = style.update_link(None) + _SHOWN
    return Segment(text, style) if text is not segment.text or style is not segment.style else segment
