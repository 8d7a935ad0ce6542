"""`McpPool`: pre-opened, never-used MCP connections, so a subagent need not wait for its servers.

Opening a connection means starting the server (a Python process takes ~0.6 s, an `npx` one
more) and the MCP handshake. The pool does that ahead of time, per server configuration (the
server's name, its settings and the working directory): each entry is a session that has been
initialized and listed its tools, and has served no call, so it is as fresh as a new one. One
entry is handed to one agent only, which owns it from then on and closes it with its other
connections. Taking an entry hardly waits: an opened one is pinged (a server that died while
idle is closed and skipped) and handed over, one still opening is handed over to finish
opening for its new owner, and with none at all the agent opens its own.

The cost: every entry is a running server process (or, over HTTP, an open session on the
server) that sits idle until a subagent takes it — `size` of them per configured server.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from pathlib import Path

from ..config.mcp_servers import McpServerConfig
from .connection import Connection, McpTool, close_connections

__all__ = ["McpPool", "ToolListings"]

_PING_TIMEOUT = 5.0


def _key(name: str, spec: McpServerConfig, cwd: Path) -> str:
    return f"{name}\0{type(spec).__name__}\0{spec.model_dump_json()}\0{cwd}"


class ToolListings:
    """The tools each server configuration listed, remembered for the agents of one tree.

    An agent that finds its server's tools here offers them to its model without opening a
    connection; it opens one when it first calls a tool.
    """

    def __init__(self) -> None:
        self._tools: dict[str, list[McpTool]] = {}

    def get(self, name: str, spec: McpServerConfig, cwd: str | Path) -> list[McpTool] | None:
        """The tools the server listed when it was last opened; None if it was never opened."""
        return self._tools.get(_key(name, spec, Path(cwd)))

    def remember(self, name: str, spec: McpServerConfig, cwd: str | Path, tools: list[McpTool]) -> None:
        self._tools[_key(name, spec, Path(cwd))] = list(tools)


class McpPool:
    """Keeps `size` opened connections ready per server configuration it has been asked to fill."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: dict[str, deque[Connection]] = {}
        self._closed = False

    def ready(self, name: str, spec: McpServerConfig, cwd: str | Path) -> int:
        """How many connections to this server wait opened (not counting those still opening)."""
        entries = self._entries.get(_key(name, spec, Path(cwd)), ())
        return sum(1 for c in entries if c.session is not None)

    def fill(self, servers: Mapping[str, McpServerConfig], cwd: str | Path) -> None:
        """Start opening connections in the background until `size` per server are ready or opening."""
        if self._closed or self.size <= 0:
            return
        for name, spec in servers.items():
            entries = self._entries.setdefault(_key(name, spec, Path(cwd)), deque())
            self._drop_dead(entries)
            for _ in range(self.size - len(entries)):
                connection = Connection(name, spec, Path(cwd))
                connection.ready.add_done_callback(_retrieve)
                connection.task = asyncio.create_task(connection.run(), name=f"mcp-pool:{name}")
                entries.append(connection)

    async def take(self, name: str, spec: McpServerConfig, cwd: str | Path) -> Connection | None:
        """Hand over the oldest live entry for this server (opened, or still opening), or None if there is none.

        An opened entry is pinged first (a millisecond or so): a server that died while it waited
        is closed and the next entry tried. The caller owns the connection it gets: it awaits
        `ready` and closes it like one it opened itself.
        """
        entries = self._entries.get(_key(name, spec, Path(cwd)))
        while entries:
            self._drop_dead(entries)
            if not entries:
                break
            connection = entries.popleft()
            if connection.session is None:  # still opening: it has not had the time to die idle
                return connection
            try:
                await asyncio.wait_for(connection.session.send_ping(), _PING_TIMEOUT)
            except asyncio.CancelledError:
                await asyncio.shield(close_connections([connection], abandon_opening=True))
                raise
            except Exception:
                await close_connections([connection], abandon_opening=True)
                continue
            return connection
        return None

    def _drop_dead(self, entries: deque[Connection]) -> None:
        """Forget entries whose server failed to open or died while waiting (their task is over)."""
        for connection in [c for c in entries if c.task is not None and c.task.done()]:
            entries.remove(connection)

    async def close(self) -> None:
        """Close every connection not handed out and stop its server."""
        self._closed = True
        connections = [c for entries in self._entries.values() for c in entries]
        self._entries.clear()
        await close_connections(connections, abandon_opening=True)


def _retrieve(ready: asyncio.Future[None]) -> None:
    """Mark a failed open as seen: a pool entry that never opens is dropped, not an unhandled error."""
    if not ready.cancelled():
        ready.exception()
