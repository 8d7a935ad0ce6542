"""A small MCP server of our own for the tests, written with the official `mcp` SDK (stdio)."""

from __future__ import annotations

import asyncio
import os

from mcp.server.mcpserver import MCPServer

app = MCPServer("calc")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool()
def server_pid() -> int:
    """The process id of this server (tests use it to tell connections apart)."""
    return os.getpid()


@app.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@app.tool()
def crash() -> str:
    """Kill this server process at once, as a crash would."""
    os._exit(3)


@app.tool()
def fail(message: str) -> str:
    """Raise an error inside the tool."""
    raise ValueError(message)


def serve_http(port: int, token: str | None) -> None:
    """Serve streamable HTTP on 127.0.0.1; with a token, a request without `Authorization: Bearer <token>` gets 401."""
    import uvicorn
    from starlette.responses import PlainTextResponse
    from starlette.types import ASGIApp, Receive, Scope, Send

    inner: ASGIApp = app.streamable_http_app()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and token is not None:
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await PlainTextResponse("missing or wrong token", status_code=401)(scope, receive, send)
                return
        await inner(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--token", help="with --http: the bearer token requests must carry")
    options = parser.parse_args()
    if options.http:
        serve_http(options.http, options.token)
    else:
        app.run()
