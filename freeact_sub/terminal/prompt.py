"""The input line: editing and history (prompt_toolkit); Enter sends, Alt-Enter or Ctrl-J adds a line.

Ctrl-C clears a line that has text and exits at an empty one; Ctrl-D exits at an empty line.
Both exits show up as `EOFError` from `read()`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

__all__ = ["CtrlC", "PromptReader"]


class CtrlC(EOFError):
    """The person pressed Ctrl-C at an empty line (an `EOFError`, as every exit is; told apart where it matters)."""


class _TakenDown(Exception):
    """The prompt was taken down by the program (`interrupt()`), not by the person."""


class PromptReader:
    """Reads one prompt at a time from the terminal."""

    def __init__(self, history_file: Path | None = None, *, style: str = "bold ansibrightcyan") -> None:
        """`style`: the `you ›` prompt's (prompt_toolkit's style words; `Theme.prompt_style`)."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings

        bindings = KeyBindings()

        @bindings.add("c-c")
        def _clear_or_exit(event: Any) -> None:
            buffer = event.current_buffer
            if buffer.text:
                buffer.reset()
            else:
                event.app.exit(exception=CtrlC())

        @bindings.add("escape", "enter")
        @bindings.add("c-j")
        def _newline(event: Any) -> None:
            event.current_buffer.insert_text("\n")

        history: Any = InMemoryHistory()
        if history_file is not None:
            try:
                history_file.parent.mkdir(parents=True, exist_ok=True)
                history = FileHistory(str(history_file))
            except OSError:
                pass  # an unwritable working directory costs only the saved history
        self._style = style
        self._session: Any = PromptSession(
            history=history,
            key_bindings=bindings,
            prompt_continuation=lambda width, line_number, wrap_count: "." * (width - 1) + " ",
        )

    async def read(self, default: str = "") -> str:
        """The next prompt the person sends (`default`: the text the line starts with); `EOFError` when they exit
        (`CtrlC` for Ctrl-C). A read taken down by `interrupt()` raises `asyncio.CancelledError`."""
        from prompt_toolkit.formatted_text import FormattedText

        try:
            text: str = await self._session.prompt_async(FormattedText([(self._style, "you › ")]), default=default)
        except _TakenDown:
            raise asyncio.CancelledError from None
        return text

    def interrupt(self) -> str:
        """Take a running `read()` down (it raises `CancelledError`) and return what was typed on its line."""
        app = self._session.app
        if not app.is_running:
            return ""
        typed: str = app.current_buffer.text
        app.exit(exception=_TakenDown())
        return typed
