"""Model requests that fail before they acted are sent again: against the scripted OpenAI and Anthropic servers.

Real HTTP on 127.0.0.1, the providers' own SDKs (their retries off), faults injected by the server
(`freeact_sub.demo.faults`): 429 with and without `Retry-After`, 500, 529 (and Anthropic's
`overloaded_error` inside a stream), streams cut before and after a tool call's arguments began, a
silent stream, a malformed chunk. Waits go to a fake clock. Each test checks the attempts the
server saw, the waits, that no cell ran twice, that the saved session holds one response per round,
and the events a person sees.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

from freeact_sub import (
    Agent,
    AgentConfig,
    CodeExecutionOutput,
    ModelError,
    ModelRetry,
    ModelSlot,
    ResponseChunk,
    SubagentFinished,
    ToolOutput,
)
from freeact_sub import retries as retries_module
from freeact_sub.demo import DemoServer
from freeact_sub.demo.faults import Fault, FaultPlan
from freeact_sub.demo.scenario import Reply, ToolCall
from freeact_sub.sessions import open_session
from tests.scripting import drive, of, until

COUNT = "ran = globals().get('ran', 0) + 1\nprint(f'cell ran {ran} time(s)')"
"""A cell that says how often it ran in its kernel: a retry that ran it again would print 2."""


def _first_user(messages: list[Mapping[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content or [])
    return ""


def respond(request: Mapping[str, Any]) -> Reply:
    """`PARENT [task args, …]` (in any turn) starts those children, then sums up; any other prompt runs `COUNT`
    then answers (again on every second round, so a resumed conversation runs one more cell)."""
    messages = request["messages"]
    first = _first_user(messages)
    rounds = sum(1 for m in messages if m.get("role") == "assistant")
    results = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
    if first.startswith("PARENT "):
        last = max(i for i, m in enumerate(messages) if m.get("role") == "user" and
                   _first_user([m]).startswith("PARENT "))
        if not any(m.get("role") == "assistant" for m in messages[last:]):
            # the prompt's JSON, without the notes that may share its message (a background child's result)
            tasks, _ = json.JSONDecoder().raw_decode(_first_user([messages[last]])[len("PARENT "):])
            return Reply(text="Starting them. ",
                         tool_calls=tuple(ToolCall("task", args, id=f"task-{i}") for i, args in enumerate(tasks)))
        return Reply(text="parent done: " + " | ".join(results))
    if rounds % 2 == 0:
        code = {"code": COUNT + "\n# " + "padding so the arguments stream in several chunks " * 2}
        return Reply(text="Counting. ", tool_calls=(ToolCall("execute_ipython_cell", code, id=f"cell-{rounds}"),))
    return Reply(text=f"The cell said: {results[-1].strip()}")


@pytest.fixture(scope="module")
def plan() -> FaultPlan:
    return FaultPlan()


@pytest.fixture(scope="module")
def server(plan: FaultPlan) -> Iterator[DemoServer]:
    with DemoServer(responder=respond, chunk_delay=0, faults=plan).start() as running:
        yield running


@pytest.fixture(autouse=True)
def fresh_plan(plan: FaultPlan) -> None:
    plan.clear()


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits of retries, on a fake clock: recorded, not slept."""
    seen: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        seen.append(seconds)
        await asyncio.sleep(0)

    monkeypatch.setattr(retries_module, "sleep", fake_sleep)
    return seen


def config(server: DemoServer, workdir: Path, wire: str = "openai", **overrides: Any) -> AgentConfig:
    model = "openai:scripted" if wire == "openai" else "anthropic:claude-demo"
    values: dict[str, Any] = {
        "model": model, "base_url": server.base_url_for(wire), "working_dir": workdir, "auto_approve": True,
        "kernel_pool_size": 0, "mcp_pool_size": 0, "model_retry_backoff": 0.5, "stream_idle_timeout": 5.0,
    }
    values.update(overrides)
    return AgentConfig(**values)


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
    import io

    from rich.console import Console

    from freeact_sub.terminal.palette import Palette
    from freeact_sub.terminal.render import Renderer
    from freeact_sub.terminal.status import SubagentBoard

    output, palette = io.StringIO(), Palette()
    renderer = Renderer(Console(file=output, width=200), palette, SubagentBoard(palette), main_id=main)
    for event in events:
        renderer.handle(event)
    return output.getvalue()


# -- the main agent, each fault on each protocol -----------------------------------------------------------------

FAULTS = {
    "429-retry-after": (Fault(status=429, retry_after=0), "rate limited"),
    "429-bare": (Fault(status=429), "rate limited"),
    "500": (Fault(status=500), "server error 500"),
    "529": (Fault(status=529), "overloaded"),
    "overloaded-in-stream": (Fault(kind="error_event", status=529, after=3), "overloaded"),
    "cut-before-call": (Fault(kind="cut", after=2), "stream dropped"),
    "cut-in-arguments": (Fault(kind="cut", after=6), "stream dropped"),  # OpenAI: 3 argument chunks in; Anthropic: 1
    "silent": (Fault(kind="silent", after=2, silence=20), "silent for 2 s"),
    "malformed": (Fault(kind="malformed", after=3), "malformed stream"),
}


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize("name", list(FAULTS))
async def test_the_main_agent_retries_each_fault_and_nothing_runs_twice(
    server: DemoServer, plan: FaultPlan, waits: list[float], workdir: Path, wire: str, name: str
) -> None:
    fault, reason = FAULTS[name]
    plan.add("MAIN", 0, fault, fault)  # the first round fails twice, then streams
    plan.add("MAIN", 1, fault)  # the second (the answer after the cell) once
    overrides = {"stream_idle_timeout": 2.0} if fault.kind == "silent" else {}
    async with Agent(config(server, workdir, wire, **overrides)) as agent, asyncio.timeout(60):
        events = await drive(agent.stream("MAIN count"))
        main = agent.agent_id
        usage = agent.usage.of(main)

    assert plan.attempts == {("MAIN", 0): 3, ("MAIN", 1): 2}
    retried = of(ModelRetry, events)
    assert [(e.attempt, e.attempts, e.reason) for e in retried] == [(2, 6, reason), (3, 6, reason), (2, 6, reason)]
    assert all(e.agent_id == main and e.message for e in retried)
    assert waits == [e.wait for e in retried]
    if fault.retry_after is not None:
        assert waits == [0.0, 0.0, 0.0]  # the provider's word, plus at most a fifth of it
    else:  # backoff from 0.5 s, doubled, jittered between half and all of it
        assert 0.25 <= waits[0] <= 0.5 and 0.5 <= waits[1] <= 1.0 and 0.25 <= waits[2] <= 0.5
    if fault.kind == "status" or name == "cut-in-arguments":  # nothing was shown yet / the text was
        assert [e.discarded for e in retried] == [fault.kind != "status"] * 3
    outputs = of(CodeExecutionOutput, events)
    assert [o.text for o in outputs] == ["cell ran 1 time(s)\n"]  # one cell, run once
    assert streamed_text(events, main) == "Counting. The cell said: cell ran 1 time(s)"
    assert usage.retries == 3 and usage.requests == 2
    assert_one_response_per_round(saved_responses(workdir), 2)
    timeline = saved_responses(workdir)[0].metadata["timeline"]  # type: ignore[index]
    assert [r["attempt"] for r in timeline["retries"]] == [2, 3]
    saved_events = open_session("latest", workdir).events()
    replayed = of(ModelRetry, saved_events)
    assert [(e.attempt, e.attempts, e.reason, e.wait) for e in replayed] == [
        (e.attempt, e.attempts, e.reason, e.wait) for e in retried]
    assert shown_by_sessions_show(saved_events, main).count(f"· {reason}") == 3


async def test_a_request_that_runs_out_of_retries_fails_with_the_providers_message(
    server: DemoServer, plan: FaultPlan, waits: list[float], workdir: Path
) -> None:
    plan.add("MAIN", 0, *[Fault(status=529, message="Overloaded: try later")] * 3)
    async with Agent(config(server, workdir, model_retries=2)) as agent, asyncio.timeout(60):
        with pytest.raises(ModelError, match=r"after 3 attempts.*Overloaded: try later"):
            await drive(agent.stream("MAIN count"))
        assert agent.history == []
    assert plan.attempts == {("MAIN", 0): 3} and len(waits) == 2


@pytest.mark.parametrize("status", [400, 401, 402])
async def test_a_request_the_provider_rejects_is_not_retried(
    server: DemoServer, plan: FaultPlan, waits: list[float], workdir: Path, status: int
) -> None:
    plan.add("MAIN", 0, Fault(status=status, message="no, not like this"))
    async with Agent(config(server, workdir)) as agent, asyncio.timeout(60):
        with pytest.raises(ModelError, match="no, not like this"):
            await drive(agent.stream("MAIN count"))
    assert plan.attempts == {("MAIN", 0): 1} and waits == []


async def test_a_wait_longer_than_the_longest_is_not_waited_for(
    server: DemoServer, plan: FaultPlan, waits: list[float], workdir: Path
) -> None:
    plan.add("MAIN", 0, Fault(status=429, retry_after=3600))
    async with Agent(config(server, workdir)) as agent, asyncio.timeout(60):
        with pytest.raises(ModelError, match="asked to wait 3600 s"):
            await drive(agent.stream("MAIN count"))
    assert plan.attempts == {("MAIN", 0): 1} and waits == []


# -- children: foreground, background, resumed ------------------------------------------------------------------


def parent_prompt(*tasks: dict[str, Any]) -> str:
    return "PARENT " + json.dumps(list(tasks))


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_foreground_background_and_resumed_children_retry_and_finish_done(
    server: DemoServer, plan: FaultPlan, waits: list[float], workdir: Path, wire: str
) -> None:
    plan.add("PARENT", 0, Fault(status=429, retry_after=0))
    plan.add("CHILD-fg", 0, Fault(status=429), Fault(kind="cut", after=5))
    plan.add("CHILD-fg", 1, Fault(status=500))
    plan.add("CHILD-bg", 0, Fault(kind="error_event", status=529, after=3))
    plan.add("CHILD-bg", 1, Fault(kind="malformed", after=3))
    async with Agent(config(server, workdir, wire, stream_idle_timeout=2.0)) as agent, asyncio.timeout(90):
        background: list[Any] = []

        async def watch() -> None:
            async for event in agent.background_events():
                background.append(event)

        watcher = asyncio.create_task(watch())
        events = await drive(agent.stream(parent_prompt(
            {"prompt": "CHILD-fg: count"}, {"prompt": "CHILD-bg: count", "run_in_background": True})))
        await until(lambda: len(of(SubagentFinished, events + background)) == 2, "both children finished")
        finished = {e.tool_call_id: e for e in of(SubagentFinished, events + background)}
        assert {k: e.status for k, e in finished.items()} == {"task-0": "done", "task-1": "done"}
        fg, bg = finished["task-0"].subagent_id, finished["task-1"].subagent_id
        plan.add("CHILD-fg", 2, Fault(kind="silent", after=2, silence=20))
        plan.add("CHILD-fg", 3, Fault(status=529))
        resumed = await drive(agent.stream(parent_prompt({"prompt": "again", "resume": fg})))
        usage = agent.usage
        watcher.cancel()
    seen = events + background + resumed
    by_agent: dict[str, list[str]] = {}
    for event in of(ModelRetry, seen):
        by_agent.setdefault(event.agent_id, []).append(event.reason)
    assert by_agent == {
        agent.agent_id: ["rate limited"],
        fg: ["rate limited", "stream dropped", "server error 500", "silent for 2 s", "overloaded"],
        bg: ["overloaded", "malformed stream"],
    }
    assert plan.attempts[("CHILD-fg", 0)] == 3 and plan.attempts[("CHILD-bg", 1)] == 2
    cells = [o.text for o in of(CodeExecutionOutput, seen)]
    assert cells.count("cell ran 1 time(s)\n") == 3 and len(cells) == 3  # fg, bg, and fg resumed (a new kernel)
    results = [o.content for o in of(ToolOutput, resumed) if o.tool_name == "task"]
    assert results == ["The cell said: cell ran 1 time(s)"]
    assert usage.of(fg).retries == 5 and usage.of(bg).retries == 2 and usage.total.retries == 8
    assert_one_response_per_round(saved_responses(workdir, fg), 4)
    assert_one_response_per_round(saved_responses(workdir, bg), 2)


# -- one tree, one budget of requests ---------------------------------------------------------------------------


async def test_the_tree_bounds_its_requests_in_flight_and_a_waiting_child_shows_it(
    waits: list[float], workdir: Path
) -> None:
    """Five children, two request slots: never more than two requests in flight; a child that waits says so."""
    with DemoServer(responder=respond, chunk_delay=0.01).start() as slow_server:
        settings = config(slow_server, workdir, max_model_requests=2, max_subagents=5)
        async with Agent(settings) as agent, asyncio.timeout(90):
            events = await drive(agent.stream(parent_prompt(*({"prompt": f"CHILD-{i}: count"} for i in range(5)))))
            peak = agent.tree.model_requests.peak
    assert [e.status for e in of(SubagentFinished, events)] == ["done"] * 5
    assert peak == 2
    waiting = [e for e in of(ModelSlot, events) if e.waiting]
    got = [e for e in of(ModelSlot, events) if not e.waiting]
    assert waiting and len(waiting) == len(got) and all(e.limit == 2 for e in waiting)
    assert {e.agent_id for e in waiting} <= {e.subagent_id for e in of(SubagentFinished, events)}


async def test_fifty_children_against_a_provider_that_fails_a_fifth_of_requests_all_finish_done(
    waits: list[float], workdir: Path
) -> None:
    """A fan-out of 50 (bound 10) while a fifth of all requests fail, spread over every fault: all done."""
    from freeact_sub.demo.faults import RandomFaults

    kinds = [Fault(status=429, retry_after=0), Fault(status=429), Fault(status=500), Fault(status=529),
             Fault(kind="error_event", status=529, after=2), Fault(kind="cut", after=2),
             Fault(kind="malformed", after=2), Fault(kind="silent", after=1, silence=20)]
    faults = RandomFaults([(0.2 / len(kinds), kind) for kind in kinds], seed=27)

    def answer(request: Mapping[str, Any]) -> Reply:
        first = _first_user(request["messages"])
        if first.startswith("PARENT "):
            return respond(request)
        return Reply(text=f"{first.split(':')[0]} says hello")

    with DemoServer(responder=answer, chunk_delay=0, faults=faults).start() as flaky:
        settings = config(flaky, workdir, "anthropic", max_subagents=10, disallowed_tools=["execute_ipython_cell"],
                          stream_idle_timeout=2.0, save_sessions=False)
        async with Agent(settings) as agent, asyncio.timeout(120):
            events = await drive(agent.stream(parent_prompt(*({"prompt": f"CHILD-{i}: hi"} for i in range(50)))))
            usage = agent.usage
    finished = of(SubagentFinished, events)
    assert [e.status for e in finished] == ["done"] * 50
    results = sorted(o.content for o in of(ToolOutput, events) if o.tool_name == "task")
    assert results == sorted(f"CHILD-{i} says hello" for i in range(50))
    assert usage.total.retries == len(of(ModelRetry, events)) == sum(faults.counts.values())
    assert sum(faults.counts.values()) >= 10 and len(faults.counts) >= 5, faults.counts
