"""Single key presses from the terminal, read without blocking the event loop.

While a turn runs, the terminal is in cbreak mode (keys arrive at once and are not echoed;
Ctrl-C still sends SIGINT) and the event loop watches stdin, so agents keep rendering while a
question waits for its answer. Keys are characters (UTF-8 decoded, so a reason may have
umlauts); Esc on its own arrives as `ESCAPE` and Shift-Tab as `BACK_TAB`, while other escape
sequences (arrows, function keys, Alt+key) are dropped so their letters never answer a question.

prompt_toolkit's VT100 parser reads the bytes: it keeps an escape sequence that arrives in pieces
(`\x1b[` in one read, `A` in the next) until it is complete, so an arrow key is never taken for
the letter `A`. An Esc with nothing after it is given out once no more bytes follow for a moment.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import os
import sys
import termios
import tty
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prompt_toolkit.keys import Keys

__all__ = ["BACK_TAB", "ESCAPE", "KeyReader", "enter_stays_enter"]

ESCAPE = "\x1b"
"""The Esc key on its own."""
BACK_TAB = "\x1b[Z"
"""Shift-Tab."""



@functools.cache
def _control() -> dict[Keys | str, str]:
    """Control keys back as the characters they are (Enter is `\\r`, Tab `\\t`, Ctrl-U `\\x15`, …).

    prompt_toolkit is imported here, when keys are first read: a one-shot without a terminal never loads it."""
    from prompt_toolkit.keys import Keys

    control: dict[Keys | str, str] = {getattr(Keys, f"Control{letter}"): chr(ord(letter) - 64) for letter in
                                      "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    control[Keys.ControlH] = "\x7f"  # Backspace: the parser gives both 0x7f and 0x08 as Ctrl-H
    return control

_LONE_ESCAPE_DELAY = 0.05
"""Seconds after the last byte before a pending lone Esc counts as the Esc key (terminals use 0.05–0.5)."""


class KeyReader:
    """Keys typed on a terminal file descriptor, as an async queue of characters."""

    def __init__(self, fd: int | None = None) -> None:
        self.fd = sys.stdin.fileno() if fd is None else fd
        self._keys: asyncio.Queue[str] = asyncio.Queue()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
        from prompt_toolkit.input.vt100_parser import Vt100Parser

        self._parsed: list[str | Keys] = []
        self._parser = Vt100Parser(lambda press: self._parsed.append(press.key))
        self._flush: asyncio.TimerHandle | None = None
        self._saved: list[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False
        """Whether stdin reached its end (no more answers can come)."""

    def __enter__(self) -> KeyReader:
        self._saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd, termios.TCSANOW)
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.fd, self._on_ready)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._flush is not None:
            self._flush.cancel()
        if self._loop is not None:
            self._loop.remove_reader(self.fd)
        if self._saved is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
        self._saved = None

    def _on_ready(self) -> None:
        try:
            data = os.read(self.fd, 1024)
        except OSError:
            data = b""
        if not data:
            self.closed = True
            assert self._loop is not None
            self._loop.remove_reader(self.fd)
            self._keys.put_nowait("")
            return
        self.feed(data)

    def feed(self, data: bytes) -> None:
        """Take bytes read from the terminal; complete keys join the queue, a partial sequence waits for the rest."""
        if self._flush is not None:
            self._flush.cancel()
        self._parser.feed(self._decoder.decode(data))
        self._release()
        loop = self._loop or asyncio.get_running_loop()
        self._flush = loop.call_later(_LONE_ESCAPE_DELAY, self._flush_pending)

    def _flush_pending(self) -> None:
        self._flush = None
        self._parser.flush()  # a lone Esc waiting for more becomes the Esc key
        self._release()

    def _release(self) -> None:
        """Queue the keys parsed so far: characters, Esc, Shift-Tab; Alt+key and other sequences are dropped."""
        from prompt_toolkit.keys import Keys

        control = _control()
        parsed, self._parsed = self._parsed, []
        index = 0
        while index < len(parsed):
            key = parsed[index]
            if key == Keys.Escape and index + 1 < len(parsed) and not isinstance(parsed[index + 1], Keys):
                index += 2  # Alt+key arrives as Esc and the key together: neither answers anything
                continue
            if key == Keys.Escape:
                self._keys.put_nowait(ESCAPE)
            elif key == Keys.BackTab:
                self._keys.put_nowait(BACK_TAB)
            elif key in control:
                self._keys.put_nowait(control[key])
            elif not isinstance(key, Keys):
                self._keys.put_nowait(key)
            index += 1

    def discard_typed_ahead(self) -> None:
        """Forget keys pressed before the question was shown."""
        while not self._keys.empty():
            key = self._keys.get_nowait()
            if key == "":  # keep the end-of-input marker
                self._keys.put_nowait(key)
                return

    async def get(self) -> str:
        """The next key; an empty string once stdin has ended."""
        if self.closed and self._keys.empty():
            return ""
        return await self._keys.get()


@contextlib.contextmanager
def enter_stays_enter(fd: int | None = None) -> Iterator[None]:
    """While it lasts, the terminal does not turn a typed Enter (carriage return) into a line feed.

    Between two prompts, and while a turn runs, the terminal translates Enter to a line feed
    (ICRNL). A line typed then, before the next prompt is ready, reached the prompt as text
    followed by Ctrl-J, the prompt's "new line": it waited, unsent, behind a `.....`
    continuation line. With ICRNL off, Enter stays Enter wherever it is typed ahead.
    """
    fd = sys.stdin.fileno() if fd is None else fd
    try:
        saved = termios.tcgetattr(fd)
    except termios.error:  # not a terminal
        yield
        return
    changed = list(saved)
    changed[0] = saved[0] & ~termios.ICRNL
    termios.tcsetattr(fd, termios.TCSANOW, changed)
    try:
        yield
    finally:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
