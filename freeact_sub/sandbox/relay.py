"""Moving a proxied connection's bytes, both ways, in the proxy's loop (`proxy_loop.Loop`): no thread of its own.

Each direction is a `_Pump`: when its source is readable it reads at most `chunk` bytes and writes them on; what its
target does not take at once it holds (in a pipe with `splice`, or in a buffer with the copy loop) and it reads
nothing more until that is written. So a connection holds at most `chunk` bytes per direction however slowly its
reader reads (a sender that outpaces it waits, as it would on a direct connection), and an idle connection holds no
buffer and no pipe at all. An end of stream from one side is passed on as a half-close (`shutdown(SHUT_WR)`); the
connection ends when both directions ended, or at once if either side fails.

A direction starts with the copy loop (`recv_into` and `send` on one buffer the loop shares, at most `_PROBE` bytes
a read: a request and a small answer take the fewest calls so) and turns to `splice` once a read filled it: a
download then moves through a pipe of `chunk` bytes inside Linux, never through Python. Measured (`bench/net_bench.py`,
`set_mode`): the copy loop alone cost twice splice's CPU for 50 MB, and 256 KiB pipes half as much again as 1 MiB.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import threading
from collections.abc import Callable

from .proxy_loop import READ, WRITE, Loop

__all__ = ["DEFAULT_MODE", "MAX_CONNECTIONS", "Relay", "close_idle_pipes", "set_mode"]

MAX_CONNECTIONS = 256
"""Connections one kernel may have open through the proxy at once; one more waits until one ends."""
_F_SETPIPE_SZ = 1031
_PROBE = 64 * 1024
"""What a direction reads through the shared buffer before it splices (if splicing)."""
_BURST = 8
"""Chunks one direction moves per wake-up before the loop turns to other connections."""
_FLAGS = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)


DEFAULT_MODE = "splice"
"""How a connection moves its bytes unless a benchmark says otherwise (`set_mode`)."""
_DEFAULT_CHUNK = 1024 * 1024


class _Settings:
    splice = DEFAULT_MODE == "splice"
    chunk = _DEFAULT_CHUNK


def set_mode(mode: str | None = None) -> None:
    """How connections made from now on move their bytes: `"splice"` or `"copy"`, optionally with the most one
    direction holds, in KiB (`"splice:1024"`); None: the default. For benchmarks."""
    kind, _, size = (mode or DEFAULT_MODE).partition(":")
    if kind not in ("splice", "copy") or not (size.isdigit() or not size):
        raise ValueError(f"{mode!r}: a mode is `splice` or `copy`, with `:<KiB>` if it likes")
    _Settings.splice = kind == "splice"
    _Settings.chunk = int(size) * 1024 if size else _DEFAULT_CHUNK


class _Pipes:
    """Pipes for `splice`, lent to a direction only while bytes sit in one (an idle connection holds none)."""

    _KEEP = 16

    def __init__(self) -> None:
        self._free: list[tuple[int, int, int]] = []

    def take(self, chunk: int) -> tuple[int, int, int]:
        while self._free:
            pipe = self._free.pop()
            if pipe[2] == chunk:
                return pipe
            self._close(pipe)
        read_end, write_end = os.pipe()
        with contextlib.suppress(OSError):  # one chunk in one call (a user over the pipe quota keeps 64 KiB)
            fcntl.fcntl(write_end, _F_SETPIPE_SZ, chunk)
        return read_end, write_end, chunk

    def give(self, pipe: tuple[int, int, int], empty: bool) -> None:
        if empty and len(self._free) < self._KEEP:
            self._free.append(pipe)
        else:
            self._close(pipe)

    def close_idle(self) -> None:
        """Close the pipes nobody borrowed (when the proxy's loop stops)."""
        while self._free:
            self._close(self._free.pop())

    @staticmethod
    def _close(pipe: tuple[int, int, int]) -> None:
        os.close(pipe[0])
        os.close(pipe[1])


_BUFFER = 1 << 20
_per_loop = threading.local()
"""The pipes and the copy loop's buffer of the loop's thread (made at their first use). What a target took at once
never stays in the buffer, so every connection of the loop can use it."""


def close_idle_pipes() -> None:
    """Close the pipes no connection holds (the proxy's loop calls it as it stops, in its thread)."""
    pipes: _Pipes | None = getattr(_per_loop, "pipes", None)
    if pipes is not None:
        pipes.close_idle()


def _pipes() -> _Pipes:
    pipes: _Pipes | None = getattr(_per_loop, "pipes", None)
    if pipes is None:
        pipes = _per_loop.pipes = _Pipes()
    return pipes


def _buffer() -> bytearray:
    buffer: bytearray | None = getattr(_per_loop, "buffer", None)
    if buffer is None:
        buffer = _per_loop.buffer = bytearray(_BUFFER)
    return buffer


class _Pump:
    """One direction: `source` to `target`, after `first` (bytes the proxy sends ahead). With `follow` False only
    `first` is sent (a request without a body: nothing more of the client's goes anywhere)."""

    def __init__(self, source: socket.socket, target: socket.socket, first: bytes, follow: bool) -> None:
        self.source, self.target = source, target
        self.follow = follow
        self.may_splice = _Settings.splice
        self.splice = False
        """Whether it splices now: once one read filled `_PROBE` bytes (a bulk transfer, where splice wins; a
        request or a small answer moves with fewer calls through the shared buffer)."""
        self.chunk = min(_Settings.chunk, _BUFFER)
        self.held = memoryview(first) if first else None
        self.pipe: tuple[int, int, int] | None = None
        self.piped = 0
        self.ended = False
        """The source's stream ended (or is not followed)."""
        self.done = False

    @property
    def pending(self) -> bool:
        return self.held is not None or self.piped > 0

    @property
    def wants_read(self) -> bool:
        return self.follow and not self.ended and not self.pending

    def pull(self) -> None:
        """The source is readable: move what it has, until the target holds back or `_BURST` chunks went."""
        for _ in range(_BURST):
            limit = self.chunk if self.splice or not self.may_splice else _PROBE
            moved = self._splice_in() if self.splice else self._copy(limit)
            if moved is None or self.pending:
                return
            if moved == 0:
                self._end()
                return
            if moved < limit and self.splice:
                return  # the socket is empty for now: one more call would only say so
            if moved == limit and self.may_splice:
                self.splice = True
            # a short read through the buffer goes on: an answer's end of stream often came with it (one wake-up less)

    def push(self, read_on: bool = True) -> None:
        """The target is writable: write what is held, then read on (if `read_on`)."""
        if self.held is not None:
            sent = _send(self.target, self.held)
            if sent < len(self.held):
                self.held = self.held[sent:]
                return
            self.held = None
        if self.piped:
            self._splice_out()
            if self.piped:
                return
        if not self.follow:
            self._end()
        elif self.ended:
            self._end()
        elif read_on:
            self.pull()

    def release(self) -> None:
        if self.pipe is not None:
            _pipes().give(self.pipe, empty=self.piped == 0)
            self.pipe, self.piped = None, 0
        self.held = None

    def _copy(self, limit: int) -> int | None:
        view = memoryview(_buffer())[:limit]
        try:
            got = self.source.recv_into(view)
        except (BlockingIOError, InterruptedError):
            return None
        if got:
            sent = _send(self.target, view[:got])
            if sent < got:
                self.held = memoryview(bytes(view[sent:got]))
        return got

    def _splice_in(self) -> int | None:
        if self.pipe is None:
            self.pipe = _pipes().take(self.chunk)
        try:
            got = os.splice(self.source.fileno(), self.pipe[1], self.chunk, flags=_FLAGS)
        except (BlockingIOError, InterruptedError):
            self.release()
            return None
        self.piped = got
        if got:
            self._splice_out()
        if not self.piped:
            self.release()
        return got

    def _splice_out(self) -> None:
        assert self.pipe is not None
        while self.piped:
            try:
                self.piped -= os.splice(self.pipe[0], self.target.fileno(), self.piped, flags=_FLAGS)
            except (BlockingIOError, InterruptedError):
                return
        self.release()

    def _end(self) -> None:
        self.ended = True
        if self.pending:
            return
        self.done = True
        if self.follow:  # pass the end of the stream on; the other direction may go on
            with contextlib.suppress(OSError):
                self.target.shutdown(socket.SHUT_WR)


def _send(target: socket.socket, data: memoryview) -> int:
    try:
        return target.send(data)
    except (BlockingIOError, InterruptedError):
        return 0


class Relay:
    """A connection the proxy let through: `client` (the kernel's) and `upstream` (both non-blocking, with
    `TCP_NODELAY` where the caller wants it: the sender's batching already happened), relayed both ways in `loop`
    (only upstream to client after `to_upstream` if not `both_ways`). `on_end` runs once both sockets are
    closed."""

    def __init__(
        self,
        loop: Loop,
        client: socket.socket,
        upstream: socket.socket,
        *,
        to_upstream: bytes = b"",
        to_client: bytes = b"",
        both_ways: bool = True,
        on_end: Callable[[Relay], None],
    ) -> None:
        self.loop, self.client, self.upstream = loop, client, upstream
        self._client_fd, self._on_end = client.fileno(), on_end
        self.up = _Pump(client, upstream, to_upstream, follow=both_ways)
        self.down = _Pump(upstream, client, to_client, follow=True)
        self.closed = False

    def start(self) -> None:
        """Send what goes ahead, and relay from then on (once the registration counts this one)."""
        self._step(None, 0)

    def on_event(self, fd: int, mask: int) -> None:
        self._step(fd, mask)

    def abort(self) -> None:
        """End it after its handler failed (the loop calls it)."""
        self.close()

    def close(self) -> None:
        """End the connection both ways now."""
        if self.closed:
            return
        self.closed = True
        self.up.release()
        self.down.release()
        self.loop.close(self.client)
        self.loop.close(self.upstream)
        self._on_end(self)

    def _step(self, fd: int | None, mask: int) -> None:
        """Move what `mask` says `fd` is ready for (None: the bytes sent ahead), then watch for what comes next."""
        if self.closed:
            return
        try:
            if fd is None:
                self.up.push()
                self.down.push(read_on=False)  # the server has not answered yet
            else:
                # the socket's writes first: what they free, its reads may fill again
                into, out_of = (self.down, self.up) if fd == self._client_fd else (self.up, self.down)
                if mask & WRITE:
                    into.push()
                if mask & READ:
                    out_of.pull()
        except OSError:  # reset, broken pipe: the connection is over both ways
            self.close()
            return
        up, down = self.up, self.down
        if down.done and (up.done or not up.follow):
            self.close()
            return
        self.loop.watch(self.client, self, (READ if up.wants_read else 0) | (WRITE if down.pending else 0))
        self.loop.watch(self.upstream, self, (READ if down.wants_read else 0) | (WRITE if up.pending else 0))
