"""The demo MCP server's tools over streamable HTTP, served at `/mcp` by the demo model server's thread.

Built on the first request, so a `DemoServer` used only as a model server never imports `mcp`. The session
manager that the SDK's streamable HTTP transport needs runs in a task of the server's event loop from then
on; it ends (and with it every open MCP session) when the server stops.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

__all__ = ["MCP_PATH", "LazyMcpEndpoint"]

MCP_PATH = "/mcp"

Scope = dict[str, Any]


class LazyMcpEndpoint:
    """An ASGI endpoint that builds the demo MCP server's HTTP app when it is first called."""

    def __init__(self) -> None:
        self._app: Any = None
        self._building: asyncio.Lock | None = None
        self._keeper: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        app = self._app if self._app is not None else await self._build()
        await app(scope, receive, send)

    async def _build(self) -> Any:
        if self._building is None:
            self._building = asyncio.Lock()
        async with self._building:
            if self._app is None:
                from .mcp_server import demo_tools

                # The SDK's server logs a client that went away mid-request (an agent stopped while it connected)
                # with a traceback; in the host, with no handler of its own, that would land on the person's
                # terminal. What a tool returns reaches the client as its result either way.
                server_log = logging.getLogger("mcp.server")
                server_log.addHandler(logging.NullHandler())
                server_log.propagate = False

                server = demo_tools(in_host=True)
                app = server.streamable_http_app(streamable_http_path=MCP_PATH)
                running = asyncio.get_running_loop().create_future()
                self._keeper = asyncio.create_task(
                    self._keep(server.session_manager, running), name="demo-mcp-sessions"
                )
                await running
                self._app = app
        return self._app

    @staticmethod
    async def _keep(manager: Any, running: asyncio.Future[None]) -> None:
        async with manager.run():
            running.set_result(None)
            await asyncio.Event().wait()  # until the server's loop ends and cancels this task
