"""Single key presses from the terminal, read without blocking the event loop.

While a turn runs, the terminal is in cbreak mode (keys arrive at once and are not echoed;
Ctrl-C still sends SIGINT) and the event loop watches stdin, so agents keep rendering while a
question waits for its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import termios
import tty
from typing import Any

__all__ = ["KeyReader"]


class KeyReader:
    """Keys typed on a terminal file descriptor, as an async queue of characters."""

    def __init__(self, fd: int | None = None) -> None:
        self.fd = sys.stdin.fileno() if fd is None else fd
        self._keys: asyncio.Queue[str] = asyncio.Queue()
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
        if b"\x1b" in data:
            return  # arrow keys and other escape sequences: their letters are not answers
        for char in data.decode(errors="ignore"):
            self._keys.put_nowait(char)

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
