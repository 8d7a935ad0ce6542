"""A test MCP server (stdio) whose one tool reads a file: what a sandboxed server may read shows in its answers."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

app = MCPServer("files")


@app.tool()
def read_file(path: str) -> str:
    """The text of the file at `path`, or the error reading it gave."""
    try:
        with open(path) as file:
            return file.read()
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


if __name__ == "__main__":
    app.run()
