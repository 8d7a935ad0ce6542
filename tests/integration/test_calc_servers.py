"""Our calc server's two builds (the official Python SDK's and the official TypeScript SDK's) offer the same tools,
schemas and results, so a test passes on either (`tests.servers.calc_server()` picks the Node.js one where it can)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from freeact_sub import AgentConfig
from freeact_sub.mcp.servers import McpConnections
from tests.npm_servers import install_mcp_sdk
from tests.servers import CALC_NODE, CALC_PYTHON

CALLS = [
    ("calc_add", {"a": 2, "b": 3}),
    ("calc_echo", {"text": "héllo wörld"}),
    ("calc_sleep", {"seconds": 0}),
    ("calc_sleep", {"seconds": 0.01}),
    ("calc_fail", {"message": "boom"}),
    ("calc_add", {"a": "two", "b": 3}),  # arguments the schema refuses: an error result from either
]


async def _offered(command: str, script: Path, cwd: Path) -> tuple[list, list]:
    mcp = McpConnections(AgentConfig(mcp_servers={"calc": {"command": command, "args": [str(script)]}}).mcp_servers,
                         cwd=cwd)
    await mcp.open()
    try:
        tools = [(t.qualified_name, t.description, t.input_schema, t.output_schema) for t in mcp.tools]
        results = []
        for name, arguments in CALLS:
            result = await mcp.call_result(name, arguments)
            # a refused argument's wording is each SDK's own; that it is an error result is what tests rely on
            text = result.text if not result.is_error or "fail" in name else "(refused)"
            results.append((name, text, result.is_error, result.structured))
        return tools, results
    finally:
        await mcp.close()


async def test_the_node_and_the_python_calc_servers_offer_the_same_tools_and_results(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not install_mcp_sdk():
        pytest.skip("no Node.js and npm here: the tests use the Python calc server only")
    python_tools, python_results = await _offered(sys.executable, CALC_PYTHON, tmp_path)
    node_tools, node_results = await _offered(node, CALC_NODE, tmp_path)
    assert [name for name, *_ in python_tools] == ["calc_add", "calc_echo", "calc_server_pid", "calc_sleep",
                                                   "calc_crash", "calc_fail"]
    assert node_tools == python_tools
    assert node_results == python_results
    assert python_results[0][1:] == ("5", False, {"result": 5})
    assert python_results[3][1] == "slept 0.01" and python_results[2][1] == "slept 0.0"
