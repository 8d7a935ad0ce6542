"""`PendingKernel`: a kernel still being acquired in the background, usable at once (each use waits for it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from pathlib import Path

from .backends import KernelBackend
from .cells import Cell, ExecutionResult, RunsCells

__all__ = ["PendingKernel"]


class PendingKernel(RunsCells):
    """A kernel still being acquired (booted, or taken from a pool) in the background; each use waits for it.

    A subagent needs its kernel only for its first cell, so it starts its first model request while
    the kernel boots rather than after. A kernel that cannot be had raises its `KernelError` at the
    first use; `shutdown()` stops an acquisition still under way, or the kernel it brought.
    """

    def __init__(self, acquire: Awaitable[KernelBackend], *, label: str, images_dir: Path) -> None:
        self._acquiring: asyncio.Future[KernelBackend] = asyncio.ensure_future(acquire)
        self._label = label
        self._images_dir = images_dir
        self._waited = 0.0
        """Seconds callers waited for the kernel, not yet reported with a cell (`ExecutionResult.kernel_wait`)."""

    def _kernel(self) -> KernelBackend | None:
        """The kernel, once it is there."""
        done = self._acquiring.done() and not self._acquiring.cancelled() and self._acquiring.exception() is None
        return self._acquiring.result() if done else None

    async def _ready(self) -> KernelBackend:
        if self._acquiring.done():
            return self._acquiring.result()
        began = time.monotonic()
        try:
            # Shielded: a cancelled cell does not cancel the acquisition, which belongs to the agent (see shutdown).
            return await asyncio.shield(self._acquiring)
        finally:
            self._waited += time.monotonic() - began

    @property
    def label(self) -> str:
        kernel = self._kernel()
        return kernel.label if kernel is not None else self._label

    @label.setter
    def label(self, value: str) -> None:
        self._label = value
        if (kernel := self._kernel()) is not None:
            kernel.label = value

    @property
    def restarts(self) -> int:
        kernel = self._kernel()
        return kernel.restarts if kernel is not None else 0

    @property
    def images_dir(self) -> Path:
        kernel = self._kernel()
        return kernel.images_dir if kernel is not None else self._images_dir

    @property
    def started(self) -> bool:
        kernel = self._kernel()
        return kernel is not None and kernel.started

    @property
    def pid(self) -> int | None:
        kernel = self._kernel()
        return kernel.pid if kernel is not None else None

    @property
    def tools_socket(self) -> str | None:
        kernel = self._kernel()
        return kernel.tools_socket if kernel is not None else None

    async def start(self, timeout: float = 60.0) -> None:
        await self._ready()

    async def run_cell(self, cell: Cell) -> ExecutionResult:
        """Run one cell on the kernel once it is there; the result counts the wait in `kernel_wait`."""
        kernel = await self._ready()
        result = await kernel.run_cell(cell)
        result.kernel_wait, self._waited = result.kernel_wait + self._waited, 0.0
        return result

    async def run_at_start(self, code: str, *, wait: bool = True) -> None:
        await (await self._ready()).run_at_start(code, wait=wait)

    async def is_alive(self) -> bool:
        if not self._acquiring.done():
            return True  # on its way
        kernel = self._kernel()
        return kernel is not None and await kernel.is_alive()

    async def interrupt(self) -> None:
        if (kernel := self._kernel()) is not None:
            await kernel.interrupt()

    async def reset(self) -> None:
        await (await self._ready()).reset()

    async def shutdown(self, *, now: bool = False) -> None:
        self._acquiring.cancel()  # no-op once it is done
        await asyncio.gather(self._acquiring, return_exceptions=True)  # (a failed acquisition's error is read here)
        if (kernel := self._kernel()) is not None:
            await kernel.shutdown(now=now)
