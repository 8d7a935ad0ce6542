"""MCP servers from npm for the tests, installed once into `<repo>/.cache/npm-servers` (needs only node and npm)."""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

from tests.system_tools import require

ROOT = Path(__file__).resolve().parent.parent
NPM_PREFIX = ROOT / ".cache" / "npm-servers"
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"


def filesystem_server(allowed_dir: Path) -> dict:
    """The `mcpServers` entry of `@modelcontextprotocol/server-filesystem`, allowed to use `allowed_dir`."""
    binary = NPM_PREFIX / "node_modules" / ".bin" / "mcp-server-filesystem"
    if not binary.exists():
        require("node", "the npm MCP server tests", "install Node.js 20 (it bundles npm)")
        npm = require("npm", "the npm MCP server tests", "install Node.js 20 (it bundles npm)")
        NPM_PREFIX.mkdir(parents=True, exist_ok=True)
        # one install at a time: test workers (pytest-xdist) may ask for it at once
        with open(NPM_PREFIX / ".install.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not binary.exists():
                subprocess.run(
                    [npm, "install", "--no-audit", "--no-fund", "--prefix", str(NPM_PREFIX), FILESYSTEM_PACKAGE],
                    check=True,
                    capture_output=True,
                    timeout=600,
                )
    return {"command": str(binary), "args": [str(allowed_dir)]}
