"""MCP over streamable HTTP: `{url, headers}` entries reach a real HTTP MCP server."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from freeact_sub import Agent, AgentConfig, McpServerError, ToolOutput
from tests.conftest import CALC_SERVER
from tests.scripting import Call, Script, drive

TOKEN = "test-token-123"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers_as_our_server(port: int) -> bool:
    """Whether our calc server answers on `port`: it refuses a request without the token, in its own words."""
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/mcp", timeout=2).close()
    except urllib.error.HTTPError as refused:
        return refused.code == 401 and b"missing or wrong token" in refused.read()
    except OSError:
        return False
    return False


def _start_http_calc_server() -> tuple[subprocess.Popen[bytes], int]:
    """Our calc server on a free port. A free port is free only until someone binds it (a kernel's ZeroMQ sockets
    take ports the same way): if another process took it first, our server cannot bind and ends, and we try again."""
    for _ in range(5):
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, str(CALC_SERVER), "--http", str(port), "--token", TOKEN],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            if _answers_as_our_server(port):
                return process, port
            time.sleep(0.1)
        _stop(process)
    raise RuntimeError("the HTTP calc server did not start")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture
def http_calc_server() -> Iterator[str]:
    """Our calc server over streamable HTTP on 127.0.0.1, requiring a bearer token; yields its URL."""
    process, port = _start_http_calc_server()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _stop(process)


async def test_http_server_tools_are_offered_and_called_with_the_configured_headers(
    http_calc_server: str, workdir: Path
) -> None:
    script = Script([Call("calc_add", {"a": 20, "b": 22}, id="add")], ["42 it is."])
    servers = {"calc": {"url": http_calc_server, "headers": {"Authorization": f"Bearer {TOKEN}"}}}
    config = AgentConfig(model=script.model, working_dir=workdir, mcp_servers=servers, enable_subagents=False)
    async with Agent(config) as agent:
        assert "calc_add" in agent.tool_names
        events = await drive(agent.stream("add"))
    outputs = [e for e in events if isinstance(e, ToolOutput)]
    assert [(o.tool_name, o.content, o.is_error) for o in outputs] == [("calc_add", "42", False)]
    assert script.tool_results(1)["add"] == "42"


async def test_http_server_that_refuses_the_connection_is_named(http_calc_server: str, workdir: Path) -> None:
    script = Script()
    servers = {"calc": {"url": http_calc_server}}  # no token: the server answers 401
    config = AgentConfig(model=script.model, working_dir=workdir, mcp_servers=servers, enable_subagents=False)
    agent = Agent(config)
    with pytest.raises(McpServerError, match="'calc'") as caught:
        await agent.start()
    assert http_calc_server in str(caught.value)
    assert agent.kernel is None  # the kernel that started alongside was shut down again
