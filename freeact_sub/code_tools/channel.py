"""The private channel between one agent and its kernel: a Unix socket that the kernel listens on.

The kernel binds its listener (`run/tools.sock` in its own folder) before any of its code runs, while it may
still make sockets; a sandboxed kernel can make no Unix socket after that, so it never connects anywhere:
the agent connects to it. The agent keeps one spare connection waiting in the listener's queue; a call in the
kernel accepts it, and the agent opens the next spare as soon as the first request arrives on one. After a
kernel restart the old spare ends, and the agent connects to the new listener.

No other kernel can see a sandboxed kernel's folder, and every kernel runs as the same user, so the agent
also proves itself: each connection starts with the channel's secret, handed only to its own kernel over
the kernel's (signed) execute channel. The kernel refuses a connection that sends anything else.

Frames are a 4-byte big-endian length and UTF-8 JSON. After the greeting, each request gets one
reply; the kernel sends nothing while it waits, so bytes or an end of stream arriving during a
call mean the kernel side gave up (an interrupted cell), and the call is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import struct
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Channel", "Handler"]

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

_HEADER = struct.Struct(">I")
_MAX_REQUEST = 64 * 1024 * 1024
_RETRY_FIRST, _RETRY_MOST = 0.005, 0.05
"""Seconds between tries to reach a listener that is not there (yet): a kernel still starting, or restarting."""


class Channel:
    """The agent's end of its kernel's code-tools channel: connections to the kernel's listener, each request
    passed to `handler`."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self.secret = secrets.token_urlsafe(32)
        """What each connection presents first; given only to this channel's kernel."""
        self._listener: Callable[[], str | None] = lambda: None
        self._keeper: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._busy: dict[asyncio.Task[Any], asyncio.Event] = {}
        """Connections waiting for a handler's reply, each with an event set once the reply is sent."""
        self._calls: dict[asyncio.Future[dict[str, Any]], str | None] = {}
        """Handler runs in progress, with the reason each was cancelled for (None: not cancelled)."""
        self._closing = False

    def open(self, listener: Callable[[], str | None]) -> None:
        """Keep a spare connection waiting at the kernel's listener (`listener()`: its path, None while unknown)."""
        if self._keeper is None and not self._closing:
            self._listener = listener
            self._keeper = asyncio.create_task(self._keep_spare(), name="code-tools-channel")

    async def _keep_spare(self) -> None:
        retry = _RETRY_FIRST
        while not self._closing:
            path = self._listener()
            try:
                if path is None:
                    raise FileNotFoundError
                reader, writer = await asyncio.open_unix_connection(path, limit=1 << 20)
            except OSError:
                await asyncio.sleep(retry)
                retry = min(retry * 2, _RETRY_MOST)
                continue
            taken = asyncio.Event()
            connection = asyncio.create_task(self._serve(reader, writer, taken))
            waiting = asyncio.ensure_future(taken.wait())
            try:
                await asyncio.wait({connection, waiting}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiting.cancel()
            if not taken.is_set():  # the listener's process went away (a restart): find the new one
                await asyncio.sleep(retry)
                retry = min(retry * 2, _RETRY_MOST)
            else:
                retry = _RETRY_FIRST

    def cancel_calls(self, reason: str) -> int:
        """End every call in progress: each waiting cell gets `ToolCancelled` with `reason`. Returns how many."""
        pending = [call for call, why in self._calls.items() if why is None and not call.done()]
        for call in pending:
            self._calls[call] = reason
            call.cancel()
        return len(pending)

    async def end_calls(self, reason: str, wait: float = 1.0) -> int:
        """`cancel_calls(reason)`, then wait (at most `wait` s) until the answers are sent. Returns how many."""
        sent = [event for event in self._busy.values() if not event.is_set()]
        ended = self.cancel_calls(reason)
        if ended and sent:
            await asyncio.wait([asyncio.ensure_future(event.wait()) for event in sent], timeout=wait)
        return ended

    async def close(self, reason: str = "the agent stopped") -> None:
        """End every pending call with `reason` and close every connection."""
        self._closing = True
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(BaseException):
                await keeper
        await self.end_calls(reason)
        connections = list(self._connections)
        for task in connections:
            task.cancel()
        if connections:
            await asyncio.gather(*connections, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, taken: asyncio.Event) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await _write(writer, {"secret": self.secret})
            await _read(reader)  # the kernel's word that it took this connection: the next spare is wanted
            taken.set()
            while True:
                try:
                    request = await _read(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                sent = self._busy[task] = asyncio.Event()
                try:
                    reply = await self._answer(request, reader)
                    if reply is None:
                        return
                    await _write(writer, reply)
                finally:
                    sent.set()
                    del self._busy[task]
                if self._closing:
                    return
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            return
        except asyncio.CancelledError:
            return  # the channel cancels a connection only to close it
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, request: Any, reader: asyncio.StreamReader) -> dict[str, Any] | None:
        """The handler's reply, or None if the kernel side hung up first (the call is then cancelled)."""
        if not isinstance(request, dict):
            return {"ok": False, "error": "arguments", "message": "a request must be a JSON object"}
        work = asyncio.ensure_future(self._handler(request))
        self._calls[work] = None
        hangup = asyncio.ensure_future(reader.read(1))
        try:
            await asyncio.wait({work, hangup}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (work, hangup):
                if not task.done():
                    task.cancel()
            await asyncio.gather(work, hangup, return_exceptions=True)
            reason = self._calls.pop(work, None)
        if work.cancelled():
            if reason is None:  # the kernel side hung up
                return None
            return {"ok": False, "error": "cancelled", "message": reason}
        if (error := work.exception()) is not None:
            return {"ok": False, "error": "tool_error", "message": f"{type(error).__name__}: {error}"}
        return work.result()


async def _read(reader: asyncio.StreamReader) -> Any:
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    if size > _MAX_REQUEST:
        raise ValueError(f"a request of {size} bytes is too large")
    return json.loads(await reader.readexactly(size))


async def _write(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    data = json.dumps(message, ensure_ascii=False, default=str).encode()
    writer.write(_HEADER.pack(len(data)) + data)
    await writer.drain()
