"""`McpConnections` against real MCP servers: our calc server and the third-party `mcp-server-time`."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import psutil
import pytest
import pytest_asyncio

from freeact_sub import AgentConfig, McpServerError
from freeact_sub.mcp.servers import McpConnections
from tests.processes import is_gone
from tests.servers import calc_server

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def calc(tmp_path_factory: pytest.TempPathFactory):
    """One open calc connection for the tests that neither crash nor close it."""
    cwd = tmp_path_factory.mktemp("mcp-cwd")
    mcp = McpConnections(AgentConfig(mcp_servers={"calc": _calc_config()}).mcp_servers, cwd=cwd)
    await mcp.open()
    yield mcp, cwd
    await mcp.close()


def _calc_config() -> dict:
    return calc_server()


def _connections(servers: dict, cwd: Path) -> McpConnections:
    return McpConnections(AgentConfig(mcp_servers=servers).mcp_servers, cwd=cwd)


async def test_tools_are_offered_as_server_underscore_tool_with_their_schemas(calc) -> None:
    mcp, _ = calc
    tools = {tool.qualified_name: tool for tool in mcp.tools}
    assert {"calc_add", "calc_echo", "calc_server_pid", "calc_sleep", "calc_crash", "calc_fail"} <= set(tools)
    add = tools["calc_add"]
    assert (add.server, add.name) == ("calc", "add")
    assert add.description == "Add two integers."
    assert add.input_schema["properties"]["a"]["type"] == "integer"
    assert sorted(add.input_schema["required"]) == ["a", "b"]
    assert mcp.has_tool("calc_add") and not mcp.has_tool("add")


async def test_calls_return_the_tool_text(calc) -> None:
    mcp, _ = calc
    assert await mcp.call("calc_add", {"a": 2, "b": 3}) == ("5", False)
    assert await mcp.call("calc_echo", {"text": "héllo wörld"}) == ("héllo wörld", False)


async def test_a_tool_that_raises_is_an_error_result(calc) -> None:
    mcp, _ = calc
    text, is_error = await mcp.call("calc_fail", {"message": "boom"})
    assert is_error
    assert "fail" in text
    assert await mcp.call("calc_add", {"a": 1, "b": 1}) == ("2", False)  # the server lives on


async def test_a_call_past_its_timeout_is_an_error_result(calc) -> None:
    mcp, _ = calc
    text, is_error = await mcp.call("calc_sleep", {"seconds": 60}, timeout=0.5)
    assert is_error
    assert "calc" in text and "timed out" in text
    assert await mcp.call("calc_add", {"a": 1, "b": 1}) == ("2", False)


async def test_a_server_that_crashes_mid_session_turns_calls_into_errors(
    calc_server_config: dict, tmp_path: Path
) -> None:
    mcp = _connections({"calc": calc_server_config, "other": calc_server_config}, tmp_path)
    await mcp.open()
    try:
        pid = int((await mcp.call("calc_server_pid", {}))[0])
        text, is_error = await mcp.call("calc_crash", {})
        assert is_error
        assert "'calc'" in text and "crash" in text
        assert await is_gone(pid)
        later, later_error = await asyncio.wait_for(mcp.call("calc_add", {"a": 1, "b": 2}), 30)
        assert later_error
        assert "'calc'" in later
        assert await mcp.call("other_add", {"a": 1, "b": 2}) == ("3", False)  # other servers keep working
    finally:
        await mcp.close()


async def test_close_stops_the_server_processes(calc_server_config: dict, tmp_path: Path) -> None:
    mcp = _connections({"calc": calc_server_config}, tmp_path)
    await mcp.open()
    pid = int((await mcp.call("calc_server_pid", {}))[0])
    assert psutil.Process(pid).is_running()
    await mcp.close()
    assert await is_gone(pid)
    assert mcp.tools == []


async def test_open_in_one_task_and_close_in_another(calc_server_config: dict, tmp_path: Path) -> None:
    # a notebook starts an agent in one cell and stops it in another
    mcp = _connections({"calc": calc_server_config}, tmp_path)
    await asyncio.create_task(mcp.open())
    pid = int((await asyncio.create_task(mcp.call("calc_server_pid", {})))[0])
    await asyncio.create_task(mcp.close())
    assert await is_gone(pid)


async def test_two_connection_sets_have_their_own_server_processes(calc_server_config: dict, tmp_path: Path) -> None:
    first = _connections({"calc": calc_server_config}, tmp_path)
    second = _connections({"calc": calc_server_config}, tmp_path)
    await asyncio.gather(first.open(), second.open())
    try:
        pids = [int((await mcp.call("calc_server_pid", {}))[0]) for mcp in (first, second)]
        assert pids[0] != pids[1]
    finally:
        await asyncio.gather(first.close(), second.close())


async def test_a_missing_server_command_names_the_server(tmp_path: Path) -> None:
    mcp = _connections({"ghost": {"command": str(tmp_path / "no-such-server")}}, tmp_path)
    with pytest.raises(McpServerError) as info:
        await mcp.open()
    assert info.value.server == "ghost"
    assert "'ghost'" in str(info.value)
    assert "no-such-server" in str(info.value)


async def test_a_program_that_is_not_an_mcp_server_names_the_server_and_shows_its_stderr(tmp_path: Path) -> None:
    script = "import sys; print('missing setting FOO_TOKEN', file=sys.stderr); sys.exit(2)"
    mcp = _connections({"broken": {"command": sys.executable, "args": ["-c", script]}}, tmp_path)
    with pytest.raises(McpServerError) as info:
        await mcp.open()
    assert info.value.server == "broken"
    assert "missing setting FOO_TOKEN" in str(info.value)


async def test_one_failing_server_closes_the_others(calc_server_config: dict, tmp_path: Path) -> None:
    # the leak fixture fails this test if the calc server outlives the failed open()
    mcp = _connections({"calc": calc_server_config, "ghost": {"command": str(tmp_path / "nothing")}}, tmp_path)
    with pytest.raises(McpServerError, match="'ghost'"):
        await mcp.open()
    assert mcp.tools == []


async def test_an_unreachable_http_server_names_the_server(tmp_path: Path) -> None:
    mcp = _connections({"remote": {"url": "http://127.0.0.1:9/mcp"}}, tmp_path)
    with pytest.raises(McpServerError) as info:
        await asyncio.wait_for(mcp.open(), 90)
    assert info.value.server == "remote"
    assert "http://127.0.0.1:9/mcp" in str(info.value)


async def test_the_server_runs_in_the_configured_directory(calc) -> None:
    mcp, cwd = calc
    pid = int((await mcp.call("calc_server_pid", {}))[0])
    assert Path(psutil.Process(pid).cwd()) == cwd


async def test_third_party_time_server(time_server_config: dict, tmp_path: Path) -> None:
    mcp = _connections({"time": time_server_config}, tmp_path)
    await mcp.open()
    try:
        names = {tool.qualified_name for tool in mcp.tools}
        assert {"time_get_current_time", "time_convert_time"} <= names
        text, is_error = await mcp.call("time_get_current_time", {"timezone": "UTC"})
        assert not is_error
        assert json.loads(text)["timezone"] == "UTC"
        text, is_error = await mcp.call(
            "time_convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
        )
        assert not is_error
        assert "21:00" in text
        text, is_error = await mcp.call("time_get_current_time", {"timezone": "Not/AZone"})
        assert is_error
    finally:
        await mcp.close()

