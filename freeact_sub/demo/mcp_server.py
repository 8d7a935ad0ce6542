"""The demo MCP server, written with the official `mcp` SDK: tools `constant` and `word_count`.

It is served two ways:

- over streamable HTTP at `DemoServer.mcp_url`, by the demo model server's own thread (`mcp_http.py`): what
  `--demo` and `demo_config()` use, so a demo run and each of its subagents connect without starting a
  process (a Python that imports `mcp` costs about a second of CPU);
- over stdio, run as ``python -P <this file>`` (`DEMO_MCP_SERVER`) or ``python -m freeact_sub.demo.mcp_server``,
  for a configuration of your own (`mcp_servers={"demo": DEMO_MCP_SERVER}`).

Its tools are small and offline: the reference value of a mathematical constant, and a word count.
"""

from __future__ import annotations

import contextlib
import logging
import math

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["CONSTANTS", "demo_tools"]

CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau, "sqrt2": math.sqrt(2), "phi": (1 + math.sqrt(5)) / 2}


def constant(name: str) -> float:
    """The reference value of a mathematical constant: pi, e, tau, sqrt2 or phi."""
    key = name.strip().lower()
    if key not in CONSTANTS:
        raise ToolError(f"unknown constant {name!r}; known: {', '.join(CONSTANTS)}")
    return CONSTANTS[key]


def word_count(text: str) -> int:
    """How many whitespace-separated words `text` has."""
    return len(text.split())


def demo_tools(*, in_host: bool = False) -> MCPServer:
    """A new MCP server named `demo` with the two tools (one per transport that serves them).

    `in_host`: it is served inside another program (the demo model server's thread), whose logging it must leave
    alone: `MCPServer()` would otherwise give the root logger a handler at level INFO (`logging.basicConfig`).
    """
    with _root_logger_left_alone() if in_host else contextlib.nullcontext():
        server = MCPServer("demo")
    server.tool()(constant)
    server.tool()(word_count)
    return server


@contextlib.contextmanager
def _root_logger_left_alone():  # type: ignore[no-untyped-def]
    # basicConfig() does nothing to a root logger that has a handler: give it one for the moment
    root = logging.getLogger()
    placeholder = logging.NullHandler()
    root.addHandler(placeholder)
    try:
        yield
    finally:
        root.removeHandler(placeholder)


if __name__ == "__main__":
    demo_tools().run()
