"""The events of background subagents, carried to the consumer in a turn or between turns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from ..events import AgentEvent

__all__ = ["BackgroundEvents"]


class BackgroundEvents:
    """Carries the events of background subagents to the consumer, in or out of a turn.

    While a `stream()` of the main agent runs, its events join that stream; between turns they
    wait here for `Agent.background_events()`. Nothing is dropped and nothing is decided here.
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        self._sink: Callable[[AgentEvent], None] | None = None

    def emit(self, event: AgentEvent) -> None:
        if self._sink is not None:
            self._sink(event)
        else:
            self._queue.put_nowait(event)

    def attach(self, sink: Callable[[AgentEvent], None]) -> None:
        """A turn begins: what waits here (unread) goes into it first, then every new event."""
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None:
                sink(item)
        self._sink = sink

    def detach(self) -> None:
        self._sink = None

    async def iterate(self) -> AsyncIterator[AgentEvent]:
        """Yield the events that arrive between turns, until `close()`."""
        while (item := await self._queue.get()) is not None:
            yield item

    def close(self) -> None:
        """End every `iterate()` loop."""
        self._queue.put_nowait(None)
