"""ACP sessions across processes and modes, with the ACP SDK's own client (issue 40, items 16 and 20).

One process hands out a session and ends before anything is said in it; a second process loads it (an empty
session is kept), answers an unknown id with `-32002` (what clients recover from), and switches modes: `auto`
runs a cell without asking, `plan` runs the prompt as the read-only `plan` type, an unknown mode is refused.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.schema import AllowedOutcome, RequestPermissionResponse

from tests.cli_fork import module_command
from tests.e2e.terminal_driver import cli_env

pytestmark = pytest.mark.timeout(180)


class Client:
    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.asked: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, options: list[Any], session_id: str, tool_call: Any,
                                 **kwargs: Any) -> RequestPermissionResponse:
        self.asked.append(tool_call)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id="once"))

    def on_connect(self, conn: Any) -> None:
        pass


def _agent(client: Client, workdir: Path) -> Any:
    return spawn_agent_process(client, *module_command("freeact_sub.cli", "acp", "--demo"), cwd=workdir,
                               env=cli_env(), transport_kwargs={"stderr": None, "shutdown_timeout": 30})


async def test_an_empty_session_loads_in_another_process_and_modes_switch(tmp_path: Path) -> None:
    async with _agent(Client(), tmp_path) as (conn, _):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        made = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
    session_id = made.session_id
    assert (tmp_path / ".freeact-sub" / "sessions" / session_id / "index.jsonl").is_file()  # kept, though empty
    assert made.modes is not None and made.modes.current_mode_id == "ask"
    assert [mode.id for mode in made.modes.available_modes] == ["ask", "auto", "plan"]

    client = Client()
    async with _agent(client, tmp_path) as (conn, _):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        with pytest.raises(RequestError) as unknown:
            await conn.load_session(cwd=str(tmp_path), session_id="20260101-000000-dead", mcp_servers=[])
        assert unknown.value.code == -32002
        loaded = await conn.load_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])
        assert loaded.modes is not None and loaded.modes.current_mode_id == "ask"

        await conn.set_session_mode(session_id=session_id, mode_id="auto")
        for _ in range(50):  # a notification is handled in a task of the client's: it may come after the response
            if any(getattr(u, "current_mode_id", None) == "auto" for u in client.updates):
                break
            await asyncio.sleep(0.1)
        assert any(getattr(u, "current_mode_id", None) == "auto" for u in client.updates)
        answer = await conn.prompt(session_id=session_id, prompt=[text_block("compute it in one cell")])
        assert answer.stop_reason == "end_turn" and client.asked == []  # auto: nobody was asked
        ran = [u for u in client.updates if getattr(u, "status", None) == "completed"]
        assert any("5050" in str(u.raw_output) for u in ran)

        await conn.set_session_mode(session_id=session_id, mode_id="ask")
        await conn.prompt(session_id=session_id, prompt=[text_block("compute it in one cell")])
        assert len(client.asked) == 1  # asked again

        await conn.set_session_mode(session_id=session_id, mode_id="plan")
        client.updates.clear()
        await conn.prompt(session_id=session_id, prompt=[text_block("compute it in one cell")])
        titles = [u.title for u in client.updates if getattr(u, "title", None)]
        assert any("(plan)" in title for title in titles), titles  # the prompt ran as the read-only plan type

        with pytest.raises(RequestError) as bad:
            await conn.set_session_mode(session_id=session_id, mode_id="yolo")
        assert bad.value.code == -32602 and "ask, auto, plan" in str(bad.value.data)
