"""Tools from npm for the tests (MCP servers, the acpx client), each installed once under `<repo>/.cache` (needs
only node and npm)."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from tests.ci_builds import wait_for_system_tools
from tests.system_tools import require

ROOT = Path(__file__).resolve().parent.parent
NPM_PREFIX = ROOT / ".cache" / "npm-servers"
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"
ACPX_PREFIX = ROOT / ".cache" / "acpx"
ACPX_PACKAGE = "acpx@0.1.15"


def filesystem_server(allowed_dir: Path) -> dict:
    """The `mcpServers` entry of `@modelcontextprotocol/server-filesystem`, allowed to use `allowed_dir`."""
    binary = npm_binary(NPM_PREFIX, FILESYSTEM_PACKAGE, "mcp-server-filesystem", "the npm MCP server tests")
    return {"command": str(binary), "args": [str(allowed_dir)]}


def acpx_binary() -> Path:
    """`acpx`, a headless ACP client nobody here wrote, installed once into `<repo>/.cache/acpx` (`.ci/run` installs
    it there first; its latest release needs Node.js 22, this one runs on CI's Node.js 20)."""
    try:
        return npm_binary(ACPX_PREFIX, ACPX_PACKAGE, "acpx", "the acpx test")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        output = getattr(exc, "stderr", b"") or b""
        why = f"npm could not install {ACPX_PACKAGE} ({output.decode(errors='replace').strip()[-300:] or exc})"
        if os.environ.get("CI") and "acpx" not in wait_for_system_tools():
            pytest.fail(why + " (.ci/run should have installed it or said why not)")
        pytest.skip(why)


def npm_binary(prefix: Path, package: str, name: str, purpose: str) -> Path:
    """The command `name` of the npm `package` installed under `prefix`, installed now if it is not (skipped, or in
    CI failed, without node and npm)."""
    binary = prefix / "node_modules" / ".bin" / name
    if not binary.exists():
        wait_for_system_tools()  # `.ci/run` may be installing it (acpx) into the same folder right now
    if not binary.exists():
        require("node", purpose, "install Node.js 20 (it bundles npm)")
        npm = require("npm", purpose, "install Node.js 20 (it bundles npm)")
        prefix.mkdir(parents=True, exist_ok=True)
        # one install at a time: test workers (pytest-xdist) may ask for it at once
        with open(prefix / ".install.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not binary.exists():
                subprocess.run(
                    [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), package],
                    check=True,
                    capture_output=True,
                    timeout=600,
                )
    return binary
