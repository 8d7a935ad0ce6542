"""Tools from npm for the tests (MCP servers, the acpx client), each installed once under `<repo>/.cache` (needs
only node and npm)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.ci_builds import wait_for_system_tools
from tests.system_tools import require

ROOT = Path(__file__).resolve().parent.parent
NPM_PREFIX = ROOT / ".cache" / "npm-servers"
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"
MCP_SDK_PACKAGE = "@modelcontextprotocol/sdk@1.32.2"
"""The official TypeScript SDK our Node.js test server (tests/servers/calc_server.cjs) runs on, pinned: installed
beside the filesystem server (which needs it too) in one `npm install`."""
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
    CI failed, without node and npm). The filesystem server's prefix also gets the pinned SDK (`MCP_SDK_PACKAGE`)."""
    binary = prefix / "node_modules" / ".bin" / name
    packages = [package, MCP_SDK_PACKAGE] if prefix == NPM_PREFIX else [package]
    if not binary.exists():
        wait_for_system_tools()  # `.ci/run` may be installing it (acpx) into the same folder right now
    if not binary.exists() or (prefix == NPM_PREFIX and not mcp_sdk_installed()):
        require("node", purpose, "install Node.js 20 (it bundles npm)")
        npm = require("npm", purpose, "install Node.js 20 (it bundles npm)")
        _install(npm, prefix, packages, done=lambda: binary.exists() and (prefix != NPM_PREFIX or mcp_sdk_installed()))
    return binary


def mcp_sdk_installed() -> bool:
    """Whether the pinned TypeScript SDK is in the filesystem server's prefix."""
    manifest = NPM_PREFIX / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
    try:
        return json.loads(manifest.read_text()).get("version") == MCP_SDK_PACKAGE.rpartition("@")[2]
    except (OSError, ValueError):
        return False


def install_mcp_sdk() -> bool:
    """Install the pinned SDK (with the filesystem server) unless it is there; False where node or npm is missing or
    npm fails (the caller then uses what needs neither)."""
    if mcp_sdk_installed():
        return True
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        return False
    try:
        _install(npm, NPM_PREFIX, [FILESYSTEM_PACKAGE, MCP_SDK_PACKAGE], done=mcp_sdk_installed)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
        return False
    return mcp_sdk_installed()


def _install(npm: str, prefix: Path, packages: list[str], done: Callable[[], bool]) -> None:
    prefix.mkdir(parents=True, exist_ok=True)
    # one install at a time: test workers (pytest-xdist) may ask for it at once
    with open(prefix / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done():
            subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), *packages],
                check=True,
                capture_output=True,
                timeout=600,
            )
