"""MCP over streamable HTTP: `{url, headers}` entries reach a real HTTP MCP server."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
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


@pytest.fixture
def http_calc_server() -> Iterator[str]:
    """Our calc server over streamable HTTP on 127.0.0.1, requiring a bearer token; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(CALC_SERVER), "--http", str(port), "--token", TOKEN],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the HTTP calc server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


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
