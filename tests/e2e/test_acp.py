"""`freeact-sub acp --demo` driven over stdio by the ACP SDK's own client: one process, one tour.

The tour: a prompt whose main agent thinks and answers in chunks, runs cells and MCP calls from code
(each a tool call with its code as content and its output streaming in), then starts three subagents
at once; their three `task` permission requests are answered out of order (third, first, second). One
child's cell is rejected with a reason (the model reads it: the child quotes it back), another child
is approved "always for this agent" (its next call asks nothing), the reviewer's rule asks nobody.
Then a slow cell is cancelled mid-turn, the session is loaded again (its conversation replayed) and
goes on; when the client closes stdin the process ends and every process it started is gone.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

from freeact_sub.demo import PI_TASK, PRIMES_TASK
from tests.cli_fork import module_command, run_of
from tests.e2e.terminal_driver import cli_env
from tests.processes import is_gone, kernel_processes

pytestmark = pytest.mark.timeout(240)

REASON = "use a smaller limit, 1000 is enough"


class TourClient:
    """The client side: records every update; answers permission requests as the test says."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.asked: list[Any] = []
        self.waiting: dict[str, asyncio.Future[RequestPermissionResponse]] = {}
        self.arrived = asyncio.Event()
        self.changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self.changed.set()

    async def request_permission(self, options: list[Any], session_id: str, tool_call: Any,
                                 **kwargs: Any) -> RequestPermissionResponse:
        future: asyncio.Future[RequestPermissionResponse] = asyncio.get_running_loop().create_future()
        self.asked.append((tool_call, [option.option_id for option in options]))
        self.waiting[tool_call.tool_call_id] = future
        self.arrived.set()
        return await future

    def on_connect(self, conn: Any) -> None:
        pass

    async def question(self, where: str = "", *, timeout: float = 60) -> Any:
        """The next open question whose title contains `where`."""
        async def found() -> Any:
            while True:
                for call, _ in self.asked:
                    if call.tool_call_id in self.waiting and where in (call.title or ""):
                        return call
                self.arrived.clear()
                await self.arrived.wait()
        return await asyncio.wait_for(found(), timeout)

    def answer(self, call: Any, option: str, reason: str | None = None) -> None:
        meta = {"reason": reason} if reason else None
        self.waiting.pop(call.tool_call_id).set_result(
            RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option, field_meta=meta)))

    def cancel_open(self) -> None:
        for future in self.waiting.values():
            future.set_result(RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled")))
        self.waiting.clear()

    async def until(self, condition: Any, timeout: float = 10) -> None:
        """Notifications are handled in tasks of the client's own: one sent before a response may come after it."""
        async def met() -> None:
            while not condition():
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(met(), timeout)

    def kinds(self, kind: str) -> list[Any]:
        return [update for update in self.updates if update.session_update == kind]

    def text(self, kind: str) -> str:
        return "".join(update.content.text for update in self.kinds(kind))

    def call_updates(self, call_id: str) -> list[Any]:
        return [u for u in self.updates if getattr(u, "tool_call_id", None) == call_id]


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


def _contents(update: Any) -> str:
    return "\n".join(block.content.text for block in update.content or [])


def _output(update: Any) -> str:
    """A cell's output so far: the block after its code."""
    blocks = update.content or []
    return blocks[-1].content.text if len(blocks) > 1 else ""


async def _tour(client: TourClient, conn: Any, session_id: str) -> None:
    turn = asyncio.create_task(conn.prompt(session_id=session_id, prompt=[text_block("show me what you can do")]))
    for _ in range(2):  # the image cell, the cell that calls MCP tools from code …
        client.answer(await client.question("Run Python"), "once")
    for _ in range(2):  # … once per call it makes
        client.answer(await client.question("Call demo_constant (from code)"), "once")
    await client.question("Start a subagent")
    while len([c for c, _ in client.asked if "Start a subagent" in c.title]) < 3:
        await client.question("Start a subagent")
    tasks = [c for c, _ in client.asked if "Start a subagent" in c.title]
    assert all(t.tool_call_id in client.waiting for t in tasks)  # three asked at once
    for index in (2, 0, 1):  # answered out of order
        client.answer(tasks[index], "once")
    primes_cell = await client.question("Run Python")  # both computing children ask; which first is the race's
    pi_call = await client.question("Call demo_constant")
    assert primes_cell.title.startswith("agent-") and "(general) · Run Python" in primes_cell.title
    options = next(o for c, o in client.asked if c is pi_call)
    assert options == ["once", "agent", "all", "reject"]
    client.answer(pi_call, "agent")  # always for the π child: its cell runs without asking
    client.answer(primes_cell, "reject", REASON)
    response = await asyncio.wait_for(turn, 120)
    await client.until(lambda: "subagents reported" in client.text("agent_message_chunk"))
    assert response.stop_reason == "end_turn"
    assert response.usage is not None and response.usage.total_tokens > 0
    assert not client.waiting

    # the main agent's words and thoughts streamed as chunks
    assert len(client.kinds("agent_message_chunk")) > 10 and "## Results" in client.text("agent_message_chunk")
    assert "\n\n## Results" in client.text("agent_message_chunk")  # a later model turn is a paragraph of its own
    assert "see the whole flow" in client.text("agent_thought_chunk")
    # a cell: kind execute, its code as content, its output streamed before it completed
    starts = client.kinds("tool_call")
    image = next(s for s in starts if "display(Image" in _contents(s))
    assert image.kind == "execute" and image.title.startswith("agent-") and image.title.endswith(" (main) · Run Python")
    asked_image = next(call for call, _ in client.asked if call.tool_call_id == image.tool_call_id)
    assert "display(Image" in asked_image.raw_input["command"]  # the code, where JupyterLab's chat card shows it
    final = client.call_updates(image.tool_call_id)[-1]
    assert final.status == "completed" and "Python 3." in _contents(final)
    # three subagents, each `task` call retitled with the child's id and type, the child's result as output
    task_starts = [s for s in starts if "Start a subagent" in s.title]
    assert len(task_starts) == 3 and all(s.kind == "think" for s in task_starts)
    ended = {}
    for start in task_starts:
        updates = client.call_updates(start.tool_call_id)
        titles = [u.title for u in updates if u.title]
        assert titles[-1].startswith("agent-"), titles  # `agent-3fa2 (general): …`
        shown = _contents(start)
        job = "primes" if PRIMES_TASK[:30] in shown else "pi" if PI_TASK[:30] in shown else "review"
        ended[job] = (titles[-1], updates[-1])
    assert "(reviewer)" in ended["review"][0] and ended["review"][1].status == "completed"
    assert "(general)" in ended["primes"][0]
    assert REASON in str(ended["primes"][1].raw_output)  # the reason reached the child's model, which quoted it
    assert "RESULT" not in str(ended["pi"][1].raw_output) and ended["pi"][1].raw_output
    # the π child's cell asked nothing ("always for this agent") and streamed its batches
    pi_cell = next(s for s in starts if "random.seed(7)" in _contents(s))
    assert pi_cell.status == "in_progress" and pi_cell.title.endswith("(general) · Run Python")
    assert pi_cell.tool_call_id not in [c.tool_call_id for c, _ in client.asked]
    streamed = [_output(u) for u in client.call_updates(pi_cell.tool_call_id) if u.status == "in_progress"]
    assert any("batch 1 of 4" in text and "RESULT" not in text for text in streamed), streamed
    # the live subagent table as the turn's plan: three entries, all ended
    plans = client.kinds("plan")
    assert len(plans[-1].entries) == 3 and all(e.status == "completed" for e in plans[-1].entries)
    assert any(e.status == "in_progress" for plan in plans for e in plan.entries)


async def _cancel(client: TourClient, conn: Any, session_id: str) -> None:
    client.updates.clear()
    turn = asyncio.create_task(conn.prompt(session_id=session_id, prompt=[text_block("something slow please")]))
    cell = await client.question("Run Python")
    client.answer(cell, "once")
    await client.until(lambda: any("tick 2" in _output(u) for u in client.call_updates(cell.tool_call_id)), 30)
    await conn.cancel(session_id=session_id)
    response = await asyncio.wait_for(turn, 60)
    assert response.stop_reason == "cancelled"
    last = client.call_updates(cell.tool_call_id)[-1]
    assert "tick 120" not in _contents(last)
    await client.until(lambda: client.call_updates(cell.tool_call_id)[-1].status == "failed")  # never left running


async def _load(client: TourClient, conn: Any, session_id: str, workdir: Path) -> None:
    client.updates.clear()
    await conn.load_session(cwd=str(workdir), session_id=session_id, mcp_servers=[])
    await client.until(lambda: "Starting a slow cell" in client.text("agent_message_chunk"))
    replayed = client.text("user_message_chunk")
    assert "show me what you can do" in replayed and "something slow please" in replayed
    assert "## Results" in client.text("agent_message_chunk")
    calls = "\n".join(_contents(update) for update in client.kinds("tool_call"))
    assert "random.seed(7)" in calls and "tick" in calls  # the children's cells, the cancelled cell
    slow = next(u for u in client.kinds("tool_call") if "tick" in _contents(u))
    assert client.call_updates(slow.tool_call_id)[-1].status == "failed"  # replayed as it ended live
    client.updates.clear()
    turn = asyncio.create_task(conn.prompt(session_id=session_id, prompt=[text_block("compute it in one cell")]))
    client.answer(await client.question("Run Python"), "once")
    response = await asyncio.wait_for(turn, 60)
    assert response.stop_reason == "end_turn"
    await client.until(lambda: "5050" in client.text("agent_message_chunk"))


async def test_an_acp_client_drives_the_demo_tour_cancels_and_loads_the_session(workdir: Path) -> None:
    client = TourClient()
    command = module_command("freeact_sub.cli", "acp", "--demo")
    transport = {"stderr": None, "shutdown_timeout": 30}
    async with spawn_agent_process(client, *command, cwd=workdir, env=cli_env(),
                                   transport_kwargs=transport) as (conn, process):
        wire: list[dict[str, Any]] = []  # what the agent sent, before the SDK's client validates it
        conn._conn.add_observer(lambda event: wire.append(event.message) if event.direction.value == "incoming"
                                else None)
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        assert init.agent_capabilities is not None and init.agent_capabilities.load_session
        session = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        await _tour(client, conn, session.session_id)
        # without `clientCapabilities.subagents`, the children are titled tool calls: no child session, no link
        sent = [m["params"] for m in wire if m.get("method") in ("session/update", "session/request_permission")]
        assert {params["sessionId"] for params in sent} == {session.session_id}
        assert not [p for p in sent if p.get("update", {}).get("sessionUpdate") == "subagent_update"]
        assert '"type": "session"' not in json.dumps(sent)
        await _cancel(client, conn, session.session_id)
        started = [p.pid for p in psutil.Process(run_of(process.pid)).children(recursive=True)]
        kernels = kernel_processes()
        await _load(client, conn, session.session_id, workdir)
        # loading a session this process runs kept it live (it was closed, its kernels stopped, and started anew)
        assert kernels and set(kernels) & set(kernel_processes())
        started += [p.pid for p in psutil.Process(run_of(process.pid)).children(recursive=True)]
        assert started  # kernels and MCP servers ran under the agent process
        closing = time.monotonic()
    assert process.returncode == 0  # it ended on its own once stdin closed (a client waits 30 s here, then kills)
    print(f"the agent stopped {time.monotonic() - closing:.1f} s after stdin closed")
    assert all([await is_gone(pid, wait=10) for pid in set(started)])
