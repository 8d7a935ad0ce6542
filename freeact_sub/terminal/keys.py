"""Single key presses from the terminal, read without blocking the event loop.

While a turn runs, the terminal is in cbreak mode (keys arrive at once and are not echoed;
Ctrl-C still sends SIGINT) and the event loop watches stdin, so agents keep rendering while a
question waits for its answer. Keys are characters (UTF-8 decoded, so a reason may have
umlauts); Esc on its own arrives as `ESCAPE` and Shift-Tab as `BACK_TAB`, while other escape
sequences (arrows, function keys, Alt+key) are dropped so their letters never answer a question.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import sys
import termios
import tty
from typing import Any

__all__ = ["BACK_TAB", "ESCAPE", "KeyReader"]

ESCAPE = "\x1b"
"""The Esc key on its own."""
BACK_TAB = "\x1b[Z"
"""Shift-Tab."""


def _sequence_end(data: bytes, start: int) -> int:
    """Where the escape sequence at `start` ends: CSI (ESC [ … final), SS3 (ESC O x), Alt+key (ESC x), or Esc alone."""
    if start + 1 >= len(data):
        return start + 1
    kind = data[start + 1]
    if kind == ord("["):
        index = start + 2
        while index < len(data) and not 0x40 <= data[index] <= 0x7E:
            index += 1
        return min(index + 1, len(data))
    if kind == ord("O"):
        return min(start + 3, len(data))
    return start + 2


class KeyReader:
    """Keys typed on a terminal file descriptor, as an async queue of characters."""

    def __init__(self, fd: int | None = None) -> None:
        self.fd = sys.stdin.fileno() if fd is None else fd
        self._keys: asyncio.Queue[str] = asyncio.Queue()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
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
        for key in self._split(data):
            self._keys.put_nowait(key)

    def _split(self, data: bytes) -> list[str]:
        """Characters, with escape sequences taken out: Esc alone stays, Shift-Tab is `BACK_TAB`, others go."""
        keys: list[str] = []
        index = 0
        while index < len(data):
            escape = data.find(b"\x1b", index)
            if escape < 0:
                keys.extend(self._decoder.decode(data[index:]))
                break
            keys.extend(self._decoder.decode(data[index:escape]))
            end = _sequence_end(data, escape)
            sequence = data[escape:end]
            if sequence == b"\x1b":
                keys.append(ESCAPE)
            elif sequence == b"\x1b[Z":
                keys.append(BACK_TAB)
            index = end
        return keys

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
