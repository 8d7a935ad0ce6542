"""The proxy's one thread: an epoll loop that serves every kernel's proxy sockets, and a few lookup threads.

Each socket the loop watches has a handler (`on_event(fd, mask)`); other threads hand it work with `call()`, which
wakes it through a socket pair. Deadlines (`later()`) end what waits too long (a request head, a connection being
made, a hand-over). Name lookups block, so they run in a small pool of threads (`lookup()`): however many kernels and
connections there are, the proxy costs the host one thread and at most `_LOOKUP_THREADS` more.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

__all__ = ["READ", "WRITE", "Handler", "Loop", "Timer"]

READ = 0x001
"""EPOLLIN."""
WRITE = 0x004
"""EPOLLOUT."""
_FAILED = 0x008 | 0x010
"""EPOLLERR, EPOLLHUP: reported whatever was asked for; a handler learns which by reading or writing."""
_LOOKUP_THREADS = 4

log = logging.getLogger("freeact_sub.sandbox.proxy")


class Handler(Protocol):
    def on_event(self, fd: int, mask: int) -> None: ...


class Timer:
    __slots__ = ("action", "cancelled")

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Loop:
    """One thread that watches sockets and runs their handlers; `stop()` ends it."""

    def __init__(self, on_stop: Callable[[], None] | None = None) -> None:
        self._on_stop = on_stop
        self._epoll = select.epoll()
        self._waker, self._wake = socket.socketpair()
        self._waker.setblocking(False)
        self._wake.setblocking(False)
        self._epoll.register(self._waker.fileno(), READ)
        self._handlers: dict[int, Handler] = {}
        self._calls: deque[Callable[[], None]] = deque()
        self._timers: list[tuple[float, int, Timer]] = []
        self._order = itertools.count()
        self._interest: dict[int, int] = {}
        self._lookups: ThreadPoolExecutor | None = None
        self._lookup_cpu = 0.0
        self._cpu_lock = threading.Lock()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="freeact-sub-proxy", daemon=True)
        self._thread.start()
        self._clock = time.pthread_getcpuclockid(self._thread.ident or 0)

    @property
    def stopping(self) -> bool:
        return self._stopping

    def in_loop(self) -> bool:
        return threading.current_thread() is self._thread

    def call(self, action: Callable[[], None]) -> None:
        """Run `action` in the loop's thread (from any thread)."""
        self._calls.append(action)
        with contextlib.suppress(OSError):  # full: it is awake anyway
            self._wake.send(b"\0")

    def run(self, action: Callable[[], None], timeout: float = 5.0) -> None:
        """Run `action` in the loop's thread and wait until it ran (at once if called there)."""
        if self.in_loop() or not self._thread.is_alive():
            action()
            return
        done = threading.Event()

        def both() -> None:
            try:
                action()
            finally:
                done.set()

        self.call(both)
        done.wait(timeout)

    def stop(self) -> None:
        """End the thread once the calls made so far ran (the sockets still watched are the owners' to close)."""
        self._stopping = True
        self.call(lambda: None)

    def watch(self, sock: socket.socket, handler: Handler, events: int) -> None:
        """Call `handler.on_event` when `sock` is ready for `events` (0: not any more). In the loop's thread.

        A handler may be called when its socket is not ready after all (its number was another's a moment ago):
        it reads and writes without blocking."""
        fd = sock.fileno()
        if fd < 0:
            return
        now = self._interest.get(fd)
        if now == events and self._handlers.get(fd) is handler:
            return
        try:
            if events == 0:
                if now is not None:
                    del self._interest[fd], self._handlers[fd]
                    self._epoll.unregister(fd)
            elif now is None:
                self._epoll.register(fd, events)
                self._interest[fd], self._handlers[fd] = events, handler
            else:
                if now != events:
                    self._epoll.modify(fd, events)
                self._interest[fd], self._handlers[fd] = events, handler
        except OSError:
            self._interest.pop(fd, None)
            self._handlers.pop(fd, None)

    def forget(self, sock: socket.socket) -> None:
        """Stop watching `sock`."""
        self.watch(sock, _NOBODY, 0)

    def close(self, sock: socket.socket, shared: bool = False) -> None:
        """Stop watching `sock` and close it. A socket only the host holds leaves the epoll set as it closes (no call
        for it); one another process holds too (`shared`: a kernel's listening socket) is taken out first."""
        fd = sock.fileno()
        if shared or fd < 0:
            self.forget(sock)
        else:
            self._interest.pop(fd, None)
            self._handlers.pop(fd, None)
        sock.close()

    def later(self, seconds: float, action: Callable[[], None]) -> Timer:
        """Run `action` in the loop's thread after `seconds`, unless the returned timer is cancelled first."""
        timer = Timer(action)
        heapq.heappush(self._timers, (time.monotonic() + seconds, next(self._order), timer))
        return timer

    def lookup(self, work: Callable[[], Any], done: Callable[[Future[Any]], None]) -> None:
        """Run `work` in a lookup thread, then `done(future)` in the loop's thread."""
        if self._lookups is None:
            self._lookups = ThreadPoolExecutor(_LOOKUP_THREADS, thread_name_prefix="freeact-sub-proxy-lookup")

        def timed() -> Any:
            began = time.thread_time()
            try:
                return work()
            finally:
                with self._cpu_lock:
                    self._lookup_cpu += time.thread_time() - began

        future = self._lookups.submit(timed)
        future.add_done_callback(lambda finished: self.call(lambda: done(finished)))

    def cpu_seconds(self) -> float:
        """The CPU time the loop's thread and its lookups used so far."""
        try:
            own = time.clock_gettime(self._clock)
        except OSError:  # the thread ended: its time is in `_final`
            own = getattr(self, "_final", 0.0)
        return own + self._lookup_cpu

    def _run(self) -> None:
        try:
            while not (self._stopping and not self._calls):
                timeout = None
                if self._timers:
                    timeout = max(0.0, self._timers[0][0] - time.monotonic())
                if self._calls:
                    timeout = 0.0
                for fd, mask in self._epoll.poll(-1 if timeout is None else timeout):
                    handler = self._handlers.get(fd)
                    if handler is None:
                        if fd == self._waker.fileno():
                            with contextlib.suppress(OSError):
                                while self._waker.recv(4096):
                                    pass
                        continue
                    if mask & _FAILED:
                        mask |= READ | WRITE
                    try:
                        handler.on_event(fd, mask)
                    except Exception as exc:  # one broken connection never stops the proxy, nor stays half-served
                        log.debug("sandbox proxy handler failed: %r", exc)
                        with contextlib.suppress(Exception):
                            getattr(handler, "abort", lambda: None)()  # a connection's; a registration has none
                while self._calls:
                    try:
                        self._calls.popleft()()
                    except Exception as exc:
                        log.debug("sandbox proxy call failed: %r", exc)
                now = time.monotonic()
                while self._timers and self._timers[0][0] <= now:
                    _, _, timer = heapq.heappop(self._timers)
                    if not timer.cancelled:
                        try:
                            timer.action()
                        except Exception as exc:
                            log.debug("sandbox proxy timer failed: %r", exc)
        finally:
            self._final = time.thread_time()
            if self._lookups is not None:
                self._lookups.shutdown(wait=False, cancel_futures=True)
            self._epoll.close()
            if self._on_stop is not None:
                self._on_stop()
            self._waker.close()
            self._wake.close()


class _Nobody:
    def on_event(self, fd: int, mask: int) -> None:
        pass


_NOBODY = _Nobody()
