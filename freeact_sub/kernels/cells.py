"""A cell as every kernel backend sees it: what is asked (`Cell`), what comes back (`ExecutionResult`).

`RunsCells` writes `execute(code, *, timeout, on_output, paused, store_history)` once, and
`async with`; a backend implements `run_cell(cell)`, `start()` and `shutdown()` and inherits
the rest (`Kernel`, `GatewayKernel`, `PendingKernel`); `KernelBackend` extends it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, Self

__all__ = ["Cell", "ExecutionResult", "ExecutionStatus", "OutputCallback", "RunsCells"]

OutputCallback = Callable[[str], Awaitable[None] | None]
"""Gets each piece of a cell's text output as it arrives (awaited if it returns an awaitable)."""

ExecutionStatus = Literal["ok", "error", "timeout", "kernel_died"]


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One cell to run, with its options."""

    code: str
    """The cell's Python (IPython) source."""
    timeout: float | None = None
    """Seconds of the cell's own time after which it is interrupted and reported as `timeout`; None: no limit."""
    on_output: OutputCallback | None = None
    """Gets each piece of text output as it arrives."""
    paused: Callable[[], float] | None = None
    """How many of the cell's seconds so far do not count against `timeout` (e.g. MCP calls waiting for approval)."""
    store_history: bool = True
    """False keeps the code out of IPython's history and execution count."""


@dataclass
class ExecutionResult:
    """The outcome of one cell."""

    text: str
    """All text output in arrival order, ANSI escapes removed."""
    images: list[Path] = field(default_factory=list)
    """Files the cell's `image/png` outputs were saved to."""
    status: ExecutionStatus = "ok"
    kernel_wait: float = 0.0
    """Seconds before the cell started that went to waiting for the kernel itself (a subagent's first cell,
    while its kernel boots: `PendingKernel`)."""


class RunsCells(Protocol):
    """Runs cells one after another: `run_cell`, `start` and `shutdown` are the backend's; `execute` and
    `async with` (start, then shut down) are the same for all."""

    async def run_cell(self, cell: Cell) -> ExecutionResult:
        """Run one cell (what `execute` does, with the cell's options in one `Cell`)."""
        ...

    async def start(self, timeout: float = ...) -> None:
        """Start the kernel and wait until it answers."""
        ...

    async def shutdown(self, *, now: bool = False) -> None:
        """Stop the kernel (`now`: without waiting for it to end gracefully, where the backend can)."""
        ...

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    async def execute(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        paused: Callable[[], float] | None = None,
        store_history: bool = True,
    ) -> ExecutionResult:
        """Run `code` as one cell; `on_output` gets each piece of text output as it arrives.

        Cells on one kernel run one after another. A cell that runs past `timeout` seconds is
        interrupted and reported with status `timeout`; `paused()`, if given, says how many of
        the cell's seconds so far do not count (e.g. its MCP calls waiting for approval).
        `store_history=False` keeps the code out of IPython's history and execution count.
        """
        cell = Cell(code=code, timeout=timeout, on_output=on_output, paused=paused, store_history=store_history)
        return await self.run_cell(cell)
