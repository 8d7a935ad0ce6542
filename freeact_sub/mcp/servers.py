"""One agent's MCP connections, held with the official `mcp` SDK.

Each configured server gets a task of its own that opens the transport and the
`ClientSession`, lists the tools, then holds the connection until `close()`. Keeping the
SDK's context managers inside one task lets an agent open its connections in one task and
close them in another (a notebook cell starts the agent, a later cell stops it).

Tools are offered to the model as `<server>_<tool>`. A server that fails to start raises
`McpServerError` naming it; a server that dies mid-session turns its calls into error results.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config.mcp_servers import McpServerConfig, StdioServerConfig
from ..errors import McpServerError
from .connection import Connection, McpTool, close_connections

if TYPE_CHECKING:
    from .pool import McpPool, ToolListings

__all__ = ["McpConnections", "McpResult", "McpTool"]

_CONNECT_TIMEOUT = 60.0


@dataclass(frozen=True)
class McpResult:
    """The outcome of one tool call."""

    text: str
    """The result's content as text (or the error's message)."""
    is_error: bool = False
    structured: Any = None
    """The structured result, when the server gives one."""


class McpConnections:
    """The MCP sessions of one agent: opened together (or each on first use), closed together.

    With `listings` that already know a server's tools (another agent of the tree listed the
    same server configuration), the agent opens no connection to it at start: the model is
    offered the known tools, and the connection is opened when the agent first calls one of
    them, taken from `pool` where it has one ready. A server whose tools are not known yet is
    opened at start, and its listing is remembered in `listings`. Either way every connection is
    this agent's alone.
    """

    def __init__(
        self,
        servers: Mapping[str, McpServerConfig],
        *,
        cwd: str | Path | None = None,
        pool: McpPool | None = None,
        listings: ToolListings | None = None,
    ) -> None:
        self._servers = dict(servers)
        self._cwd = Path(cwd or Path.cwd())
        self._pool = pool
        self._listings = listings
        self._connections: dict[str, Connection] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self._by_tool: dict[str, McpTool] = {}

    @property
    def tools(self) -> list[McpTool]:
        """All tools of all servers, in configuration order."""
        return list(self._by_tool.values())

    @property
    def opened(self) -> list[str]:
        """The servers this agent has a connection to (opened, or opening), in the order they were opened."""
        return list(self._connections)

    async def open(self) -> None:
        """Connect to every server whose tools are not known yet, at once; if one fails, close all and raise
        `McpServerError` naming it. The others are opened on first use."""
        known = {name: self._listings.get(name, spec, self._cwd) if self._listings else None
                 for name, spec in self._servers.items()}
        now = {name: spec for name, spec in self._servers.items() if known[name] is None}
        try:
            if self._pool is not None:
                taken = await asyncio.gather(*(self._pool.take(n, s, self._cwd) for n, s in now.items()))
            else:
                taken = [None] * len(now)
        except BaseException:
            await asyncio.shield(self.close())
            raise
        for (name, spec), pooled in zip(now.items(), taken, strict=True):
            self._connections[name] = self._started(pooled or Connection(name, spec, self._cwd))
        try:
            await asyncio.gather(*(c.ready for c in self._connections.values()))
        except BaseException as exc:
            failed = next((c for c in self._connections.values() if c.failure is not None), None)
            details = failed.stderr_tail() if failed else ""
            await self.close()
            if isinstance(exc, asyncio.CancelledError) or failed is None:
                raise
            message = _describe_failure(failed.spec, exc)
            if details:
                message += f"\nserver stderr:\n{details}"
            raise McpServerError(failed.name, message) from exc
        for name, spec in self._servers.items():
            connection = self._connections.get(name)
            tools = connection.tools if connection is not None else known[name] or []
            if connection is not None and self._listings is not None:
                self._listings.remember(name, spec, self._cwd, connection.tools)
            for tool in tools:
                self._by_tool[tool.qualified_name] = tool

    @staticmethod
    def _started(connection: Connection) -> Connection:
        if connection.task is None:
            connection.task = asyncio.create_task(connection.run(), name=f"mcp:{connection.name}")
        return connection

    async def _connection(self, server: str) -> Connection:
        """The agent's connection to `server`, opened now if this is its first use (waits until it is ready)."""
        lock = self._opening.setdefault(server, asyncio.Lock())
        async with lock:
            connection = self._connections.get(server)
            if connection is None:
                spec = self._servers[server]
                pooled = await self._pool.take(server, spec, self._cwd) if self._pool is not None else None
                connection = self._connections[server] = self._started(pooled or Connection(server, spec, self._cwd))
                if self._pool is not None:
                    self._pool.fill({server: spec}, self._cwd)  # one was taken: the next agent finds one ready
        with contextlib.suppress(Exception):
            await asyncio.shield(connection.ready)
        return connection

    def has_tool(self, qualified_name: str) -> bool:
        return qualified_name in self._by_tool

    async def call(
        self, qualified_name: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> tuple[str, bool]:
        """Call a tool; returns its text and whether it is an error. Never raises for server faults."""
        result = await self.call_result(qualified_name, arguments, timeout=timeout)
        return result.text, result.is_error

    async def call_result(
        self, qualified_name: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> McpResult:
        """Call a tool: its text, structured result and whether it is an error. Never raises for server faults.

        The first call to a server opens this agent's connection to it.
        """
        tool = self._by_tool[qualified_name]
        connection = await self._connection(tool.server)
        session = connection.session
        if session is None:
            if connection.failure is not None and not connection.tools:
                failure = _describe_failure(connection.spec, connection.failure)
                message = f"MCP server {connection.name!r} could not start: {failure}"
                tail = connection.stderr_tail()
                return McpResult(message + (f"\nserver stderr:\n{tail}" if tail else ""), is_error=True)
            reason = f": {connection.failure}" if connection.failure else ""
            return McpResult(f"MCP server {connection.name!r} is not running{reason}", is_error=True)
        try:
            result = await session.call_tool(tool.name, arguments, read_timeout_seconds=timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            tail = connection.stderr_tail()
            message = f"MCP server {connection.name!r} failed while running {tool.name!r}: {_error_text(exc)}"
            return McpResult(message + (f"\nserver stderr:\n{tail}" if tail else ""), is_error=True)
        is_error = bool(getattr(result, "is_error", False))
        structured = None if is_error else getattr(result, "structured_content", None)
        return McpResult(_result_text(result), is_error=is_error, structured=structured)

    async def close(self) -> None:
        """Close every session and stop every server process started for it; one still starting (a slow server
        when the start is cancelled) is stopped at once rather than waited for: nobody will use it."""
        connections = list(self._connections.values())
        self._connections.clear()
        self._by_tool.clear()
        await close_connections(connections, abandon_opening=True)


def _describe_failure(spec: McpServerConfig, exc: BaseException) -> str:
    if isinstance(spec, StdioServerConfig):
        command = " ".join([spec.command, *spec.args])
        if isinstance(exc, FileNotFoundError | PermissionError):
            return f"could not start {command!r}: {exc.strerror or exc}"
        return f"{command!r} did not start as an MCP server: {_error_text(exc)}"
    return f"could not connect to {spec.url}: {_error_text(exc)}"


def _error_text(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__


def _result_text(result: Any) -> str:
    pieces: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            pieces.append(block.text)
        elif kind in ("image", "audio"):
            pieces.append(f"[{kind} content: {getattr(block, 'mime_type', '') or 'binary'}]")
        elif kind == "resource":
            resource = block.resource
            pieces.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        elif kind == "resource_link":
            pieces.append(f"[resource link {block.uri}]")
        else:
            pieces.append(str(block))
    structured = getattr(result, "structured_content", None)
    if not pieces and structured is not None:
        pieces.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(pieces)
