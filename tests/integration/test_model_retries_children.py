"""Children's model requests that fail before they acted are sent again: foreground, background and resumed
children on both protocols, the tree's bound on requests in flight, and 50 children against a provider
that fails a fifth of all requests (the main agent and each fault: `test_model_retries.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from freeact_sub import Agent, CodeExecutionOutput, ModelRetry, ModelSlot, SubagentFinished, ToolOutput
from freeact_sub.demo import DemoServer
from freeact_sub.demo.faults import Fault, FaultPlan
from freeact_sub.demo.scenario import Reply
from tests.retrying import (  # noqa: F401 (fixtures)
    assert_one_response_per_round,
    config,
    fake_clock,
    first_user,
    fresh_plan_fixture,
    parent_prompt,
    plan_fixture,
    respond,
    saved_responses,
    server_fixture,
    waits_fixture,
)
from tests.scripting import drive, of, until

# -- children: foreground, background, resumed ------------------------------------------------------------------


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
    cells = [o.content for o in of(CodeExecutionOutput, seen)]
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
        first = first_user(request["messages"])
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


async def test_an_agent_type_retries_as_often_as_it_says_and_a_child_that_runs_out_fails_its_task(
    server: DemoServer, plan: FaultPlan, waits: list[float], workdir: Path
) -> None:
    """A type with `model_retries=0` fails at its first 429 (its parent is told, with the provider's message); a type
    with more retries than the parent's outlasts what the parent would not."""
    plan.add("CHILD-fragile", 0, Fault(status=429, message="slow down, fragile"))
    plan.add("CHILD-sturdy", 0, *[Fault(status=503)] * 3)
    types = {"fragile": {"description": "Never retried.", "model_retries": 0},
             "sturdy": {"description": "Retried more.", "model_retries": 3}}
    async with Agent(config(server, workdir, model_retries=1, agents=types)) as agent, asyncio.timeout(90):
        events = await drive(agent.stream(parent_prompt(
            {"prompt": "CHILD-fragile: count", "subagent_type": "fragile"},
            {"prompt": "CHILD-sturdy: count", "subagent_type": "sturdy"})))
    finished = {e.tool_call_id: e.status for e in of(SubagentFinished, events)}
    assert finished == {"task-0": "failed", "task-1": "done"}
    assert plan.attempts == {("CHILD-fragile", 0): 1, ("CHILD-sturdy", 0): 4}
    results = {o.tool_call_id: o for o in of(ToolOutput, events) if o.tool_name == "task"}
    assert results["task-0"].is_error and "slow down, fragile" in results["task-0"].content
    assert [e.reason for e in of(ModelRetry, events)] == ["unavailable"] * 3
