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


if __name__ == "__main__":
    app.run()
