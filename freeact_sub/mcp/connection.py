"""One MCP server connection (`Connection`), held by a task of its own, and closing several at once.

`McpConnections` (one agent's connections) and `McpPool` (never-used ones waiting for an agent)
both hold `Connection`s; keeping the SDK's context managers inside the connection's own task
lets one task open it and another close it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

from ..config.mcp_servers import HttpServerConfig, McpServerConfig, StdioServerConfig
from ..sandbox import confined_command
from ..tools.names import qualified_tool_name

# The SDK's client logs a response that arrives after its session closed (an agent stopped mid-call) with a
# traceback. Without a handler in the `mcp` loggers' line, logging's last resort would print it on the person's
# terminal; with this one it goes where the program's own logging sends it (nowhere, if it set up none).
logging.getLogger("mcp.client").addHandler(logging.NullHandler())

__all__ = ["Connection", "McpTool", "close_connections"]

_CONNECT_TIMEOUT = 60.0


@dataclass(frozen=True)
class McpTool:
    """A tool of an MCP server, as offered to the model."""

    server: str
    name: str
    """The tool's own name on its server."""
    qualified_name: str
    """`<server>_<tool>`: the name the model calls."""
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    """The schema of the tool's structured result, if the server declares one."""



async def close_connections(connections: list[Connection], *, abandon_opening: bool = False) -> None:
    """Let each connection end its session and stop its server; cancel what has not ended in 10 s.

    `abandon_opening` cancels at once the connections still opening (nobody will use them, so
    their handshake is not waited for).
    """
    for connection in connections:
        connection.closing.set()
        if abandon_opening and connection.session is None and connection.task is not None:
            connection.terminate()
            connection.task.cancel()
    tasks = [c.task for c in connections if c.task is not None]
    if not tasks:
        return
    done, pending = await asyncio.wait(tasks, timeout=10.0)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=5.0)
    for task in done:
        if not task.cancelled():
            task.exception()  # retrieved: a crash was already reported through call()


class Connection:
    """One server connection of one agent: its task, its session once open, and the error that ended it."""

    def __init__(self, name: str, spec: McpServerConfig, default_cwd: Path) -> None:
        self.name = name
        self.spec = spec
        self.default_cwd = default_cwd
        self.session: Any = None
        self.tools: list[McpTool] = []
        self.failure: BaseException | None = None
        self.task: asyncio.Task[None] | None = None
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.closing = asyncio.Event()
        self.stderr: IO[str] | None = None
        self._final_stderr = ""

    async def run(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                from mcp import ClientSession

                session = await stack.enter_async_context(ClientSession(read, write))
                await asyncio.wait_for(session.initialize(), _CONNECT_TIMEOUT)
                listing = await asyncio.wait_for(session.list_tools(), _CONNECT_TIMEOUT)
                self.tools = [
                    McpTool(
                        server=self.name,
                        name=tool.name,
                        qualified_name=qualified_tool_name(self.name, tool.name),
                        description=tool.description or "",
                        input_schema=dict(tool.input_schema or {"type": "object", "properties": {}}),
                        output_schema=dict(tool.output_schema) if tool.output_schema else None,
                    )
                    for tool in listing.tools
                ]
                self.session = session
                self.ready.set_result(None)
                await self.closing.wait()
        except BaseException as exc:
            self.failure = exc
            if not self.ready.done():
                self.ready.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.session = None
            if self.stderr is not None:
                self._final_stderr = self.stderr_tail(lines=40)  # read after run() ends, to explain a failed start
                self.stderr.close()

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        spec = self.spec
        if isinstance(spec, StdioServerConfig):
            from mcp import StdioServerParameters, stdio_client

            self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8")
            cwd = spec.cwd or str(self.default_cwd)
            command, args = spec.command, spec.args
            if spec.sandbox is not None and spec.sandbox.enforced:
                home = (spec.env or {}).get("HOME", "")
                command, *args = confined_command(spec.sandbox, [command, *args], Path(cwd), homes=[home])
            params = StdioServerParameters(command=command, args=args, env=spec.env, cwd=cwd)
            return stdio_client(params, errlog=self.stderr)
        assert isinstance(spec, HttpServerConfig)
        from mcp.shared._httpx_utils import create_mcp_http_client

        return _http_transport(spec.url, create_mcp_http_client(headers=dict(spec.headers)))

    def terminate(self) -> None:
        """SIGTERM a stdio server's process group at once (the SDK starts it in a session of its own).

        The server is found among this process's children by its stderr, the file this connection
        made for it (Linux's `/proc`; elsewhere nothing is done and the SDK's own stop applies).
        """
        if self.stderr is None or self.stderr.closed:
            return
        with contextlib.suppress(OSError):
            mine = os.fstat(self.stderr.fileno())
            for child in psutil.Process().children():
                with contextlib.suppress(OSError):
                    theirs = os.stat(f"/proc/{child.pid}/fd/2")
                    if (theirs.st_dev, theirs.st_ino) == (mine.st_dev, mine.st_ino):
                        if os.getpgid(child.pid) == child.pid:
                            os.killpg(child.pid, signal.SIGTERM)
                        else:
                            os.kill(child.pid, signal.SIGTERM)
                        return

    def stderr_tail(self, lines: int = 8) -> str:
        if self.stderr is not None and self.stderr.closed:
            return "\n".join(self._final_stderr.splitlines()[-lines:])
        if self.stderr is None:
            return ""
        with contextlib.suppress(Exception):
            self.stderr.flush()
            self.stderr.seek(0)
            return "\n".join(self.stderr.read().strip().splitlines()[-lines:])
        return ""


@contextlib.asynccontextmanager
async def _http_transport(url: str, client: Any) -> Any:
    from mcp.client.streamable_http import streamable_http_client

    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams
