"""The demo MCP server (stdio), written with the official `mcp` SDK.

Run it as ``python -P <this file>`` (`DEMO_MCP_SERVER`) or
``python -m freeact_sub.demo.mcp_server``. Its tools are small and offline: the
reference value of a mathematical constant, and a word count.
"""

from __future__ import annotations

import math

from mcp.server.mcpserver import MCPServer

__all__ = ["CONSTANTS", "app"]

CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau, "sqrt2": math.sqrt(2), "phi": (1 + math.sqrt(5)) / 2}

app = MCPServer("demo")


@app.tool()
def constant(name: str) -> float:
    """The reference value of a mathematical constant: pi, e, tau, sqrt2 or phi."""
    key = name.strip().lower()
    if key not in CONSTANTS:
        raise ValueError(f"unknown constant {name!r}; known: {', '.join(CONSTANTS)}")
    return CONSTANTS[key]


@app.tool()
def word_count(text: str) -> int:
    """How many whitespace-separated words `text` has."""
    return len(text.split())


if __name__ == "__main__":
    app.run()
