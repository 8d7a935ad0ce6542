"""A line the person types while a turn runs and no question waits: `/agents` answers at once, the rest is told
to wait for the prompt (a key pressed then is never taken as an answer to a later question)."""

from __future__ import annotations

__all__ = ["TypedLine"]

_ENTER = ("\r", "\n")
_BACKSPACE = ("\x7f", "\b")
_MOST = 4000
"""Characters kept of one line (a paste during a turn must not grow without bound)."""


class TypedLine:
    """The keys typed so far on one line; `key()` returns the whole line at Enter."""

    def __init__(self) -> None:
        self.text = ""

    def key(self, key: str) -> str | None:
        """Take one key; the line (stripped, maybe empty) when it is Enter, else None."""
        if key in _ENTER:
            line, self.text = self.text.strip(), ""
            return line
        if key in _BACKSPACE:
            self.text = self.text[:-1]
        elif key == "\x15":  # Ctrl-U
            self.text = ""
        elif key.isprintable() and len(self.text) < _MOST:
            self.text += key
        return None
