"""Python warnings, in the terminal, as one styled line each: no source line, no file of ours, said once.

A library warns through `warnings.warn` (a `ConfigWarning` about an agent file's field, a pattern
that matches no tool, a sandbox the platform cannot enforce). Python's own display prints the
warning's category, our file and line, and the source line that warned, straight onto stderr —
across the spinner or the live view. Here it is `freeact-sub: warning: …` in yellow, printed through
the session's console (so a live view is redrawn below it), each distinct message once.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import TextIO

from rich.console import Console
from rich.text import Text

from .gutter import Gutter
from .safe_text import clean

__all__ = ["warnings_as_lines"]

_HEAD = "freeact-sub: warning: "


@contextlib.contextmanager
def warnings_as_lines(console: Console) -> Iterator[None]:
    """While inside, every warning is one line on `console`, each distinct text once."""
    seen: set[str] = set()

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        text = " ".join(clean(str(message)).split())  # one line, whatever the warning's text held
        if text not in seen:
            seen.add(text)
            if not console.is_terminal:  # a log or a pipe: one line, whatever its length
                console.print(Text(_HEAD + text, style="yellow"), soft_wrap=True)
                return
            # in a terminal too narrow for it, its words wrapped behind a hanging indent (never cut mid-word)
            console.print(Gutter(Text(text, style="yellow"), Text(_HEAD, style="yellow"), Text(" " * len(_HEAD))))

    with warnings.catch_warnings():
        warnings.simplefilter("always")  # `show` says each text once, wherever it was raised
        warnings.showwarning = show
        yield
