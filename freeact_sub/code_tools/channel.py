"""The private channel from one kernel to its agent: a Unix socket that only that kernel can use.

The socket lives in a folder of its own made by `mkdtemp` (mode 0700: no other user can even
reach it) and is itself mode 0600. That keeps other users out, but every kernel runs as the
same user, so each channel also has a secret of its own, handed only to its own kernel over
the kernel's (signed) execute channel. A connection must send the secret first; one that
sends anything else is answered "refused" and closed, and counted in `refused`.

Frames are a 4-byte big-endian length and UTF-8 JSON. After the greeting, each request gets one
reply; the kernel sends nothing while it waits, so bytes or an end of stream arriving during a
call mean the kernel side gave up (an interrupted cell), and the call is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import secrets
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from .. import _connection_dirs

__all__ = ["Channel", "Handler"]

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

_HEADER = struct.Struct(">I")
_MAX_REQUEST = 64 * 1024 * 1024
_GREETING_TIMEOUT = 10.0


class Channel:
    """A Unix socket server whose authenticated connections pass each request to `handler`."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self.secret = secrets.token_urlsafe(32)
        """What a connection must present first; given only to this channel's kernel."""
        self._folder = _connection_dirs.create(_connection_dirs.TOOLS_PREFIX)  # swept if this host dies
        self.path = os.path.join(self._folder, "tools.sock")
        """The socket's path (inside a private folder, mode 0700)."""
        self.refused = 0
        """Connections refused because they did not present the secret."""
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._busy: dict[asyncio.Task[Any], asyncio.Event] = {}
        """Connections waiting for a handler's reply, each with an event set once the reply is sent."""
        self._calls: dict[asyncio.Future[dict[str, Any]], str | None] = {}
        """Handler runs in progress, with the reason each was cancelled for (None: not cancelled)."""
        self._closing = False

    async def open(self) -> None:
        """Start listening."""
        self._server = await asyncio.start_unix_server(self._serve, path=self.path, limit=1 << 20)
        os.chmod(self.path, 0o600)

    def cancel_calls(self, reason: str) -> int:
        """End every call in progress: each waiting cell gets `ToolCancelled` with `reason`. Returns how many."""
        pending = [call for call, why in self._calls.items() if why is None and not call.done()]
        for call in pending:
            self._calls[call] = reason
            call.cancel()
        return len(pending)

    async def end_calls(self, reason: str, wait: float = 1.0) -> None:
        """`cancel_calls(reason)`, then wait (at most `wait` s) until the answers are sent."""
        sent = [event for event in self._busy.values() if not event.is_set()]
        if self.cancel_calls(reason) and sent:
            await asyncio.wait([asyncio.ensure_future(event.wait()) for event in sent], timeout=wait)

    async def close(self, reason: str = "the agent stopped") -> None:
        """Stop listening, end every pending call with `reason`, close every connection and remove the folder."""
        self._closing = True
        server, self._server = self._server, None
        if server is not None:
            server.close()
        await self.end_calls(reason)
        connections = list(self._connections)
        for task in connections:
            task.cancel()
        if connections:
            await asyncio.gather(*connections, return_exceptions=True)
        if server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2.0)
        _connection_dirs.remove(self._folder)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            greeting = await asyncio.wait_for(_read(reader), _GREETING_TIMEOUT)
            offered = greeting.get("secret") if isinstance(greeting, dict) else None
            if not isinstance(offered, str) or not hmac.compare_digest(offered.encode(), self.secret.encode()):
                self.refused += 1
                refusal = "refused: this channel belongs to another agent's kernel"
                await _write(writer, {"ok": False, "message": refusal})
                return
            await _write(writer, {"ok": True})
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
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, ValueError):
            return
        except asyncio.CancelledError:
            # This task belongs to the channel, which cancels it only to close the connection; a cancelled
            # connection task would make asyncio's stream server log a spurious error.
            return
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
