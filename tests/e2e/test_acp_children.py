"""Subagents as ACP child sessions (issue 40, item 21), with the ACP SDK's own client over stdio.

The client advertises `clientCapabilities.subagents: {}` (the SDK 0.11 has no field for it, nor a type for
`subagent_update`: the test sends `initialize` and reads the wire through the SDK's connection). The demo tour
starts three children: each is announced on the root session before anything bears its session id, its cells
and questions are on its own session, its answer is a message there, and the `task` call links to it. The
primes child is cancelled through its own session while its question is open: it alone stops, its siblings
finish, the turn ends normally. A client without the capability sees none of this (`test_acp.py`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.connection import StreamDirection, StreamEvent

from tests.cli_fork import module_command
from tests.e2e.terminal_driver import cli_env
from tests.e2e.test_acp import TourClient

pytestmark = pytest.mark.timeout(240)


class ChildClient(TourClient):
    """The tour's client, also noting which session each question was asked on."""

    def __init__(self) -> None:
        super().__init__()
        self.asked_on: dict[str, str] = {}

    async def request_permission(self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any) -> Any:
        self.asked_on[tool_call.tool_call_id] = session_id
        return await super().request_permission(options, session_id, tool_call, **kwargs)


def _updates(wire: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(session id, update) of every `session/update` the agent sent, in the order they came."""
    return [(m["params"]["sessionId"], m["params"]["update"]) for m in wire if m.get("method") == "session/update"]


async def test_children_are_child_sessions_and_cancelling_one_stops_it_alone(tmp_path: Path) -> None:
    client = ChildClient()
    wire: list[dict[str, Any]] = []

    def record(event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING:
            wire.append(event.message)

    command = module_command("freeact_sub.cli", "acp", "--demo")
    async with spawn_agent_process(
        client, *command, cwd=tmp_path, env=cli_env(), transport_kwargs={"stderr": None, "shutdown_timeout": 30}
    ) as (conn, _):
        conn._conn.add_observer(record)
        await conn._conn.send_request(
            "initialize", {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": {"subagents": {}}}
        )
        root = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        turn = asyncio.create_task(conn.prompt(session_id=root, prompt=[text_block("show me what you can do")]))
        for _ in range(2):
            client.answer(await client.question("Run Python"), "once")
        for _ in range(2):
            client.answer(await client.question("Call demo_constant (from code)"), "once")
        while len([c for c, _ in client.asked if "Start a subagent" in c.title]) < 3:
            await client.question("Start a subagent")
        for task in [c for c, _ in client.asked if "Start a subagent" in c.title]:
            assert client.asked_on[task.tool_call_id] == root  # the main agent's questions stay on the root session
            client.answer(task, "once")
        primes_cell = await client.question("Run Python")  # the π child asks for its MCP call first
        pi_call = await client.question("Call demo_constant")
        primes, pi = client.asked_on[primes_cell.tool_call_id], client.asked_on[pi_call.tool_call_id]
        assert primes != pi and all(s.startswith(f"{root}:agent-") for s in (primes, pi))
        await conn.cancel(session_id=primes)  # the person stops the primes child from its own session
        client.answer(pi_call, "agent")
        response = await asyncio.wait_for(turn, 120)
        await client.until(lambda: "subagents reported" in client.text("agent_message_chunk"))
        client.cancel_open()
    assert response.stop_reason == "end_turn"

    updates = _updates(wire)
    announced = {
        u["sessionId"]: (index, u)
        for index, (on, u) in enumerate(updates)
        if u["sessionUpdate"] == "subagent_update" and on == root and "title" in u
    }
    assert len(announced) == 3 and {primes, pi} <= set(announced)
    for child, (index, update) in announced.items():
        assert update["capabilities"] == {"cancel": {}} and update["state"] == {"state": "running"}
        assert update["title"].startswith("agent-") and update["title"].endswith(")")
        first = next(i for i, (on, _) in enumerate(updates) if on == child)
        assert first > index  # nothing bears the child's id before it was announced
        asks = [
            m for m in wire if m.get("method") == "session/request_permission" and m["params"]["sessionId"] == child
        ]
        assert all(
            wire.index(m) > wire.index(next(w for w in wire if w.get("params", {}).get("update") is update))
            for m in asks
        )
    # each child's cells and words on its own session; nothing of theirs on the root one
    on_pi = [u for on, u in updates if on == pi]
    assert any(u["sessionUpdate"] == "tool_call" and "random.seed(7)" in str(u.get("content")) for u in on_pi)
    assert "π ≈" in "".join(u["content"]["text"] for u in on_pi if u["sessionUpdate"] == "agent_message_chunk")
    on_root = [u for on, u in updates if on == root]
    assert not any("random.seed(7)" in str(u.get("content")) for u in on_root if u["sessionUpdate"] == "tool_call")
    # the `task` calls, on the root session, link to their children
    calls = [u for u in on_root if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
    links = {block["sessionId"] for u in calls for block in u.get("content") or [] if block["type"] == "session"}
    assert links == set(announced)
    # the primes child alone was stopped: idle, cancelled; its open cell failed; the others ended their turn
    ends = {
        u["sessionId"]: u["state"]
        for on, u in updates
        if u["sessionUpdate"] == "subagent_update" and u.get("state", {}).get("state") == "idle"
    }
    assert ends[primes] == {"state": "idle", "stopReason": "cancelled"}
    assert [state["stopReason"] for child, state in ends.items() if child != primes] == ["end_turn", "end_turn"]
    states = [
        u["state"]["state"]
        for on, u in updates
        if u["sessionUpdate"] == "subagent_update" and u["sessionId"] == pi and "state" in u
    ]
    assert states[:3] == ["running", "requires_action", "running"] and states[-1] == "idle"
    cell = [u for on, u in updates if on == primes and u.get("toolCallId") == primes_cell.tool_call_id]
    assert cell[-1]["status"] == "failed"
