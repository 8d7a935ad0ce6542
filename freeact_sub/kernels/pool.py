"""`KernelPool`: pre-started, never-used kernels, so a subagent gets a fresh kernel without waiting for one to boot."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from .backends import KernelBackend

__all__ = ["KernelPool"]

_SHRINK_AFTER = 2.0
"""Seconds the pool holds more ready kernels than wanted before it shuts the surplus down: the count of callers
expected dips for a moment while a batch's calls become children, and a kernel shut down then is booted again."""


# Kernels booting at once. A forked kernel costs ~0.1 s of CPU to boot (a launched one ~0.4 s); more at once than this
# only slows them all down on a small machine. Fewer (one per core) made a fan-out of 50 children slower at a high
# load (8.1 against 6.1 s, alternated): a boot also waits on the host's loop, and the pool then fell behind the waves.
_CONCURRENT_STARTS = 4


WARM_UP_CELL = "pass"
"""Run on each kernel booted ahead of its caller, out of IPython's history and execution count: a kernel's first cell
costs 10-40 ms more than its next ones (code paths run and pages written for the first time, none of it an import),
which a child would otherwise wait for in its first cell. The kernel is as fresh for the model's code as before. A
kernel a caller already waits for goes to it at once: the warm-up's round trip would only come before its first cell
instead of in it (at a high load, a 50-child fan-out was slower with every kernel warmed: 7.78 against 6.47 s)."""


class KernelPool:
    """Hands out started kernels, each exactly once, and keeps `size` of them ready.

    Kernels start in the background. A caller that finds the pool empty gets a kernel booted
    for it (`fill(demand)` with the number of callers waiting). `expect(n)` says how many callers
    are known to come soon (subagents queued for a slot): a pool that is on (`size` > 0) then keeps
    that many ready, so their kernels boot while the running ones work, not when they get their
    slot; when fewer are expected again (the batch has its kernels), the ready kernels beyond
    `size` are shut down. `close()` stops the kernels still booting and shuts down every kernel
    not handed out. `discarded`, if given, is called with each kernel the pool shut down itself (never one it
    handed out), after its shutdown: what was made for the kernel alone goes with it.
    """

    def __init__(
        self,
        new_kernel: Callable[[], KernelBackend],
        size: int,
        *,
        discarded: Callable[[KernelBackend], None] | None = None,
    ) -> None:
        self._new_kernel = new_kernel
        self._discarded = discarded
        self._size = size
        self._ready: asyncio.Queue[KernelBackend | BaseException] = asyncio.Queue()
        self._booting: set[asyncio.Task[None]] = set()
        self._stopping: set[asyncio.Task[None]] = set()
        self._shrinking: asyncio.TimerHandle | None = None
        self._start_slots = asyncio.Semaphore(_CONCURRENT_STARTS)
        self._starting = 0
        """Boots past `_held_back`: their kernels start (or run their warm-up cell)."""
        self._changed = asyncio.Event()
        """Set (and replaced) when the callers waiting, the boots starting or the kernels ready change."""
        self._waiting = 0
        self._expected = 0
        self._closed = False

    @property
    def ready(self) -> int:
        """How many started kernels wait in the pool."""
        return self._ready.qsize()

    @property
    def booting(self) -> int:
        """How many kernels are starting for the pool (not those being stopped, which will bring none)."""
        # A boot that has put its kernel in the queue is done, though its done-callback may not have run yet;
        # one that was cancelled may still be stopping its kernel for a while.
        return sum(not task.done() and not task.cancelling() for task in self._booting)

    def _target(self) -> int:
        return max(self._size, self._expected, self._waiting)

    def expect(self, callers: int) -> None:
        """`callers` will ask for a kernel soon: keep as many ready (at least `size`), starting them now.

        Fewer than before: the ready kernels beyond `max(size, callers)` are shut down (in the background) if
        they are still beyond it `_SHRINK_AFTER` seconds later.
        A pool of size 0 is off: it starts no kernel ahead of a caller, expected or not.
        """
        self._expected = max(0, callers) if self._size > 0 else 0
        self.fill()
        if self._shrinking is None and self._ready.qsize() > self._target():
            self._shrinking = asyncio.get_running_loop().call_later(_SHRINK_AFTER, self._shrink)

    def _shrink(self) -> None:
        self._shrinking = None
        if self._closed:
            return
        surplus = self._ready.qsize() - self._target()
        for _ in range(max(0, surplus)):
            item = self._ready.get_nowait()
            if isinstance(item, BaseException):
                continue
            task = asyncio.create_task(self._drop(item), name="kernel-pool-shrink")
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    def fill(self, demand: int = 0) -> None:
        """Start kernels in the background until `max(size, expected, demand)` are ready or booting."""
        if self._closed:
            return
        wanted = max(self._target(), demand) - self._ready.qsize() - self.booting
        for _ in range(wanted):
            task = asyncio.create_task(self._boot(), name="kernel-pool-boot")
            self._booting.add(task)
            task.add_done_callback(self._booting.discard)

    async def _drop(self, kernel: KernelBackend) -> None:
        """Shut down a kernel nobody took, then let go of what was made for it alone (also if the shutdown failed)."""
        try:
            await kernel.shutdown(now=True)
        finally:
            if self._discarded is not None:
                self._discarded(kernel)

    def _poke(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _held_back(self) -> bool:
        """Whether a boot waits before it starts its kernel: while callers wait and the boots already starting (and
        the kernels ready) are enough for them, a boot for a caller still to come would only take CPU from theirs.
        On 2 cores, a fan-out's first wave waited ~0.5 s for its missing kernels while the next wave's booted beside
        them; the next wave's boot once the first has its kernels, during its cells."""
        return 0 < self._waiting <= self._ready.qsize() + self._starting

    async def _boot(self) -> None:
        kernel = self._new_kernel()
        try:
            while self._held_back():
                await self._changed.wait()
            self._starting += 1
            try:
                async with self._start_slots:
                    await kernel.start()
                if self._waiting <= self._ready.qsize():  # booted ahead: nobody waits for it while it warms
                    await kernel.execute(WARM_UP_CELL, store_history=False)
            finally:
                self._starting -= 1
                self._poke()  # the waiters see it once it is ready (below, without a pause) or dropped
        except asyncio.CancelledError:
            await self._drop(kernel)
            self.fill(demand=self._waiting)  # a caller that came while this boot was being stopped still gets one
            raise
        except Exception as exc:
            await self._drop(kernel)
            if self._waiting > self._ready.qsize():  # tell a waiting caller why it gets no kernel
                self._ready.put_nowait(exc)
            return  # else a later caller starts a kernel of its own rather than fail with a stale error
        if self._closed or self._ready.qsize() >= self._target():
            await self._drop(kernel)  # the caller it was booted for is gone and the pool is full
        else:
            self._ready.put_nowait(kernel)

    async def acquire(self) -> KernelBackend:
        """The next started kernel; if none is ready, one is started for this caller."""
        self._waiting += 1
        self._poke()
        try:
            if self._ready.empty():
                self.fill(demand=self._waiting)
            item = await self._ready.get()
        except asyncio.CancelledError:
            self._waiting -= 1
            self._poke()
            await self._stop_surplus_boots()
            raise
        self._waiting -= 1
        self._poke()
        if isinstance(item, BaseException):
            raise item
        return item

    async def _stop_surplus_boots(self) -> None:
        """Stop the kernels still booting beyond the pool's size and the callers still waiting."""
        active = [task for task in self._booting if not task.done() and not task.cancelling()]  # not being stopped
        surplus = self._ready.qsize() + len(active) - self._target()
        boots = active[: max(0, surplus)]
        for task in boots:
            task.cancel()
        await asyncio.gather(*boots, return_exceptions=True)

    async def close(self) -> None:
        """Stop booting kernels and shut down every kernel not handed out."""
        self._closed = True
        if self._shrinking is not None:
            self._shrinking.cancel()
        booting = list(self._booting)
        for task in booting:
            if not task.cancelling():  # a second cancel would cut its kernel's shutdown short: the kernel would stay
                task.cancel()
        await asyncio.gather(*booting, return_exceptions=True)
        kernels = []
        while not self._ready.empty():
            item = self._ready.get_nowait()
            if not isinstance(item, BaseException):
                kernels.append(item)
        with contextlib.suppress(Exception):
            await asyncio.gather(*(self._drop(k) for k in kernels), *list(self._stopping), return_exceptions=True)
