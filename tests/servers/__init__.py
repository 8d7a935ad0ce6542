"""Our own MCP servers for the tests: `calc` (its tools: add, echo, server_pid, sleep, crash, fail) and `files`."""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

CALC_PYTHON = Path(__file__).with_name("calc_server.py")
"""On the official Python SDK (`mcp`); also serves streamable HTTP (`--http PORT`)."""
CALC_NODE = Path(__file__).with_name("calc_server.cjs")
"""On the official TypeScript SDK: the same tools, schemas and results over stdio."""


def calc_server() -> dict:
    """The `mcpServers` entry of the calc server over stdio (a new dict each call).

    The Node.js one where node and npm are at hand (the pinned SDK is installed on first use): it starts on about
    0.4 s of CPU, the Python one on about 1.5 s (the `mcp` package's import), and the suite starts it about eighty
    times. Else the Python one: both offer the same tools, schemas and results. `FREEACT_SUB_TEST_CALC=python` asks
    for the Python one.
    """
    command, script = _calc_command()
    return {"command": command, "args": [script]}


@functools.cache
def _calc_command() -> tuple[str, str]:
    from tests.npm_servers import install_mcp_sdk

    node = shutil.which("node")
    if os.environ.get("FREEACT_SUB_TEST_CALC") != "python" and node is not None and install_mcp_sdk():
        return node, str(CALC_NODE)
    return sys.executable, str(CALC_PYTHON)
