"""What the model-retry tests share (`tests/integration/test_model_retries*.py`): a scripted responder, a fake
clock for the waits, and the checks on what was saved and shown."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from rich.console import Console

from freeact_sub import AgentConfig, ModelRetry, ResponseChunk
from freeact_sub.demo import DemoServer
from freeact_sub.demo.faults import FaultPlan
from freeact_sub.demo.scenario import Reply, ToolCall
from freeact_sub.models import retries as retries_module
from freeact_sub.sessions import open_session
from freeact_sub.terminal.palette import Palette
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.status import SubagentBoard
from tests.scripting import configs

COUNT = "ran = globals().get('ran', 0) + 1\nprint(f'cell ran {ran} time(s)')"
"""A cell that says how often it ran in its kernel: a retry that ran it again would print 2."""


def first_user(messages: list[Mapping[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content or [])
    return ""


def respond(request: Mapping[str, Any]) -> Reply:
    """`PARENT [task args, …]` (in any turn) starts those children, then sums up; any other prompt runs `COUNT`
    then answers (again on every second round, so a resumed conversation runs one more cell)."""
    messages = request["messages"]
    first = first_user(messages)
    rounds = sum(1 for m in messages if m.get("role") == "assistant")
    results = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
    if first.startswith("PARENT "):
        last = max(i for i, m in enumerate(messages) if m.get("role") == "user" and
                   first_user([m]).startswith("PARENT "))
        if not any(m.get("role") == "assistant" for m in messages[last:]):
            # the prompt's JSON, without the notes that may share its message (a background child's result)
            tasks, _ = json.JSONDecoder().raw_decode(first_user([messages[last]])[len("PARENT "):])
            return Reply(text="Starting them. ",
                         tool_calls=tuple(ToolCall("task", args, id=f"task-{i}") for i, args in enumerate(tasks)))
        return Reply(text="parent done: " + " | ".join(results))
    if rounds % 2 == 0:
        code = {"code": COUNT + "\n# " + "padding so the arguments stream in several chunks " * 2}
        return Reply(text="Counting. ", tool_calls=(ToolCall("execute_ipython_cell", code, id=f"cell-{rounds}"),))
    return Reply(text=f"The cell said: {results[-1].strip()}")


def fake_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits of retries, on a fake clock: recorded, not slept."""
    seen: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        seen.append(seconds)
        await asyncio.sleep(0)

    monkeypatch.setattr(retries_module, "sleep", fake_sleep)
    return seen


_scripted = configs(
    auto_approve=True, kernel_pool_size=0, mcp_pool_size=0, model_retry_backoff=0.5, stream_idle_timeout=5.0
)


def config(server: DemoServer, workdir: Path, wire: str = "openai", **overrides: Any) -> AgentConfig:
    model = "openai:scripted" if wire == "openai" else "anthropic:claude-demo"
    return _scripted(model, workdir, base_url=server.base_url_for(wire), **overrides)


def saved_responses(workdir: Path, agent_id: str | None = None) -> list[ModelResponse]:
    messages = open_session("latest", workdir).messages(agent_id)
    return [m for m in messages if isinstance(m, ModelResponse)]


def assert_one_response_per_round(responses: list[ModelResponse], rounds: int) -> None:
    """The saved transcript has exactly the complete responses: one per round, none cut, none twice."""
    assert len(responses) == rounds, [r.parts for r in responses]
    calls = [p.tool_call_id for r in responses for p in r.parts if isinstance(p, ToolCallPart)]
    assert len(calls) == len(set(calls))
    for response in responses:
        assert all(isinstance(p, TextPart | ToolCallPart) for p in response.parts)


def streamed_text(events: list[Any], agent_id: str) -> str:
    """What a consumer shows of one agent's streamed text: chunks, minus those a `ModelRetry` discarded."""
    shown: list[str] = []
    current: list[str] = []
    for event in events:
        if event.agent_id != agent_id:
            continue
        if isinstance(event, ResponseChunk):
            current.append(event.content)
        elif isinstance(event, ModelRetry):
            current = []  # the partial response is dropped
        elif type(event).__name__ == "Response":
            shown.append("".join(current))
            current = []
    return "".join(shown)


def shown_by_sessions_show(events: list[Any], main: str) -> str:
    """What `freeact-sub sessions show` prints for these replayed events (the live session's renderer)."""
    output, palette = io.StringIO(), Palette()
    renderer = Renderer(Console(file=output, width=200), palette, SubagentBoard(palette), main_id=main)
    for event in events:
        renderer.handle(event)
    return output.getvalue()


def parent_prompt(*tasks: dict[str, Any]) -> str:
    return "PARENT " + json.dumps(list(tasks))


# The fault-injecting demo server, one per test module that imports these fixtures.


@pytest.fixture(scope="module", name="plan")
def plan_fixture() -> FaultPlan:
    """The faults the module's demo server injects (planned per test)."""
    return FaultPlan()


@pytest.fixture(scope="module", name="server")
def server_fixture(plan: FaultPlan) -> Iterator[DemoServer]:
    """The demo server of the module, injecting the planned faults."""
    with DemoServer(responder=respond, chunk_delay=0, faults=plan).start() as running:
        yield running


@pytest.fixture(autouse=True, name="fresh_plan")
def fresh_plan_fixture(plan: FaultPlan) -> None:
    """Each test starts with no fault planned."""
    plan.clear()


@pytest.fixture(name="waits")
def waits_fixture(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits of the retry loop, on a fake clock."""
    return fake_clock(monkeypatch)
