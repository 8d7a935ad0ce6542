"""The interactive session's prompt comes first: it is up at once, and the agent starts behind it.

Reading the configuration, importing pydantic-ai and the provider's SDK, starting the demo server, the
kernel and the MCP servers take seconds; none of it is needed to type. So the prompt reads while they
start, and a prompt sent before they are up waits for them only, saying so. A question the start needs
answered (the folder's trust) takes the prompt down, keeping what was typed, and the prompt comes back
after it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .prompt import PromptReader

__all__ = ["EarlyPrompt"]

T = TypeVar("T")


class EarlyPrompt:
    """Reads the session's first prompt while the start runs."""

    def __init__(
        self,
        reader: PromptReader,
        waiting: Callable[[], contextlib.AbstractContextManager[Any]],
        leaving: Callable[[EOFError], contextlib.AbstractContextManager[Any]],
    ) -> None:
        """`waiting`: what shows while a sent prompt waits for the start (a status line); `leaving`: what shows
        while the start is cancelled because the person left (given how they left)."""
        self._reader = reader
        self._waiting = waiting
        self._leaving = leaving
        self._typed = ""
        self._read: asyncio.Task[str] | None = None
        self._sent: str | None = None

    async def during(self, work: Awaitable[T]) -> T:
        """`work`'s result, the prompt reading meanwhile. `EOFError` (`CtrlC`) when the person leaves first:
        `work` is then cancelled and awaited."""
        job = asyncio.ensure_future(work)
        try:
            while not job.done() and self._sent is None:
                read = self._reading()
                await asyncio.wait({job, read}, return_when=asyncio.FIRST_COMPLETED)
                if read.done():
                    self._read = None
                    sent = read.result()  # EOFError: the person left
                    self._sent = sent if sent.strip() else None  # an empty line is no prompt: read on
            if not job.done():
                with self._waiting():
                    return await job
            return job.result()
        except EOFError as left:
            job.cancel()
            with self._leaving(left), contextlib.suppress(BaseException):
                await job
            raise
        except BaseException:
            job.cancel()
            with contextlib.suppress(BaseException):
                await job
            raise

    @property
    def reader(self) -> PromptReader:
        """The prompt's reader, for the prompts after the first."""
        return self._reader

    async def take_down(self) -> None:
        """Take the prompt down for a question, keeping what was typed for when it comes back."""
        if self._read is not None:
            read, self._read = self._read, None
            self._typed = self._reader.interrupt()
            with contextlib.suppress(BaseException):
                await read

    async def first(self) -> str:
        """The first prompt: the one sent during the start, else the one the prompt still up reads (`EOFError`
        when the person leaves instead)."""
        while self._sent is None:
            read = self._reading()
            self._read = None
            sent = await read
            self._sent = sent if sent.strip() else None
        return self._sent

    def _reading(self) -> asyncio.Task[str]:
        if self._read is None:
            self._read = asyncio.create_task(self._reader.read(default=self._typed), name="first-prompt")
            self._typed = ""
        return self._read
