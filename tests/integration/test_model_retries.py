"""Model requests that fail before they acted are sent again: the main agent against the scripted OpenAI and
Anthropic servers.

Real HTTP on 127.0.0.1, the providers' own SDKs (their retries off), faults injected by the server
(`freeact_sub.demo.faults`): 429 with and without `Retry-After`, 500, 529 (and the overloaded error
event inside a stream), streams cut before and after a tool call's arguments began, a silent stream,
a malformed chunk; and requests that are not retried. Waits go to a fake clock. Each test checks the
attempts the server saw, the waits, that no cell ran twice, that the saved session holds one
response per round, and the events a person sees. Children: `test_model_retries_children.py`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from freeact_sub import Agent, CodeExecutionOutput, ModelError, ModelRetry
from freeact_sub.demo import DemoServer
from freeact_sub.demo.faults import Fault, FaultPlan
from freeact_sub.sessions import open_session
from tests.retrying import (  # noqa: F401 (fixtures)
    assert_one_response_per_round,
    config,
    fake_clock,
    fresh_plan_fixture,
    plan_fixture,
    respond,
    saved_responses,
    server_fixture,
    shown_by_sessions_show,
    streamed_text,
    waits_fixture,
)
from tests.scripting import drive, of

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
    assert [o.content for o in outputs] == ["cell ran 1 time(s)\n"]  # one cell, run once
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
