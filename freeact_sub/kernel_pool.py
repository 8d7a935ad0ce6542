"""`KernelPool`: pre-started, never-used kernels, so a subagent gets a fresh kernel without waiting for one to boot."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from .kernel import Kernel

__all__ = ["KernelPool"]


class KernelPool:
    """Keeps up to `size` started kernels ready. A kernel handed out is never handed out again.

    Refilling happens in the background, one kernel at a time so that it does not compete with
    the work of running agents for the CPU. `close()` shuts down every kernel still in the pool.
    """

    def __init__(self, new_kernel: Callable[[], Kernel], size: int) -> None:
        self._new_kernel = new_kernel
        self._size = size
        self._ready: list[Kernel] = []
        self._filling: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def ready(self) -> int:
        """How many started kernels wait in the pool."""
        return len(self._ready)

    def fill(self) -> None:
        """Start refilling the pool in the background (does nothing if it is full or filling)."""
        if self._closed or self._size <= 0 or len(self._ready) >= self._size:
            return
        if self._filling is None or self._filling.done():
            self._filling = asyncio.create_task(self._fill(), name="kernel-pool-fill")

    async def _fill(self) -> None:
        while not self._closed and len(self._ready) < self._size:
            kernel = self._new_kernel()
            try:
                await kernel.start()
            except asyncio.CancelledError:
                await kernel.shutdown()
                raise
            except Exception:
                await kernel.shutdown()
                return
            if self._closed:
                await kernel.shutdown()
                return
            self._ready.append(kernel)

    async def acquire(self) -> Kernel:
        """A started kernel: from the pool if one is ready, else started now."""
        if self._ready:
            kernel = self._ready.pop(0)
        else:
            kernel = self._new_kernel()
            try:
                await kernel.start()
            except BaseException:
                await kernel.shutdown()
                raise
        self.fill()
        return kernel

    async def close(self) -> None:
        """Stop refilling and shut down every kernel in the pool."""
        self._closed = True
        if self._filling is not None and not self._filling.done():
            self._filling.cancel()
            with contextlib.suppress(BaseException):
                await self._filling
        kernels, self._ready = self._ready, []
        await asyncio.gather(*(k.shutdown() for k in kernels), return_exceptions=True)
