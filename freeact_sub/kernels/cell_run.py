"""What every kernel backend does alike while one cell runs: pass its output on and keep its clock.

`Kernel` (local) and `GatewayKernel` read their messages differently, but a cell's text is
collected and handed to the caller's callback the same way, and its timeout, the time that does
not count (approval waits) and the grace after an interrupt follow the same rules; so do the
words the model reads when a kernel died or had to be restarted.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

__all__ = [
    "DEATH_NOTICE",
    "DIED_BEFORE_NOTICE",
    "INTERRUPT_GRACE",
    "STUCK_NOTICE",
    "CellClock",
    "CellOutput",
    "OutputCallback",
]

OutputCallback = Callable[[str], Awaitable[None] | None]

INTERRUPT_GRACE = 5.0
"""Seconds an interrupted cell has to stop before its kernel is restarted."""

DEATH_NOTICE = ("\nThe kernel died while running this cell and was restarted: all its state (variables, imports, "
                "definitions) was lost.\n")
DIED_BEFORE_NOTICE = ("The kernel had died since the last cell and was restarted: all its state (variables, "
                      "imports, definitions) was lost.\n")
STUCK_NOTICE = "\nThe cell did not stop after an interrupt; the kernel was restarted and its state was lost.\n"


class CellOutput:
    """The text one cell has produced so far, each piece passed on to `on_output` as it arrives."""

    def __init__(self, on_output: OutputCallback | None) -> None:
        self._on_output = on_output
        self._parts: list[str] = []

    async def emit(self, text: str) -> None:
        """Keep `text` and hand it to the callback (awaited if it returns an awaitable)."""
        if not text:
            return
        self._parts.append(text)
        if self._on_output is not None:
            outcome = self._on_output(text)
            if outcome is not None:
                await outcome

    @property
    def text(self) -> str:
        return "".join(self._parts)


class CellClock:
    """A cell's timeout, measured in the cell's own time: seconds `paused()` reports do not count."""

    def __init__(self, timeout: float | None, paused: Callable[[], float] | None) -> None:
        self.timeout = timeout
        self._deadline = time.monotonic() + timeout if timeout else None
        self._paused = paused
        self.interrupted_at: float | None = None
        """When the cell was interrupted for running past its timeout (cell time), if it was."""

    def now(self) -> float:
        """Cell time: the monotonic clock moved back by the seconds that do not count."""
        now = time.monotonic()
        if self._deadline is not None and self._paused is not None:
            now -= self._paused()
        return now

    def due(self, now: float) -> bool:
        """The cell ran past its timeout and has not been interrupted for it yet."""
        return self._deadline is not None and self.interrupted_at is None and now >= self._deadline

    def stuck(self, now: float) -> bool:
        """The cell was interrupted more than `INTERRUPT_GRACE` seconds ago and is still running."""
        return self.interrupted_at is not None and now - self.interrupted_at > INTERRUPT_GRACE

    def wait(self, now: float, poll: float) -> float:
        """How long to wait for the next message: `poll`, or less if the timeout comes first."""
        if self._deadline is None or self.interrupted_at is not None:
            return poll
        return max(0.0, min(poll, self._deadline - now))

    def timeout_notice(self) -> str:
        return f"\nExecution timed out after {self.timeout:g} s and was interrupted.\n"
