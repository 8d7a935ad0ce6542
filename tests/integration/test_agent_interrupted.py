"""A turn whose consumer stops reading does not go on acting, and a cancelled turn's history tells the truth.

- `break` without closing the stream: no further model round or tool call starts (also in a
  subagent), and the next `stream()` ends the abandoned turn and runs;
- a cancelled turn keeps the prompt and every completed call in the history, answers each
  unfinished call with "the user interrupted", and adds a note; pending approvals end rejected;
- a failing model still rolls the turn back (see test_agent_faults).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolReturnPart, UserPromptPart

from freeact_sub import (
    Agent,
    AgentConfig,
    ApprovalRequest,
    CodeExecutionOutput,
    CodeExecutionOutputChunk,
    ResponseChunk,
    RunCancelled,
)
from tests.scripting import Block, Call, Router, Script, drive, shared_agent

pytestmark = pytest.mark.asyncio(loop_scope="module")

COUNT_CELL = "n = globals().get('n', 0) + 1\nprint('cell', n)"


shared = shared_agent("interrupted")


def endless_cells(count: int = 50) -> list[list[Call]]:
    return [[Call("execute_ipython_cell", {"code": COUNT_CELL})] for _ in range(count)]


async def cells_run(agent: Agent, script: Script) -> int:
    """How many counting cells ran in the kernel (asked through a new turn)."""
    script.reset([Call("execute_ipython_cell", {"code": "print(globals().get('n', 0))"}, id="count")], ["counted"])
    await drive(agent.stream("how many?"))
    return int(script.tool_results(1)["count"])


def interruption_of(agent: Agent) -> ModelRequest:
    """The last request of the history: the interrupted turn's results and note."""
    last = agent.history[-1]
    assert isinstance(last, ModelRequest)
    assert isinstance(last.parts[-1], UserPromptPart) and "interrupted" in str(last.parts[-1].content)
    return last


def results_of(request: ModelRequest) -> dict[str, str]:
    return {p.tool_call_id: str(p.content) for p in request.parts if isinstance(p, ToolReturnPart)}


# -- an abandoned stream ------------------------------------------------------------------------


async def test_a_stream_left_with_break_starts_no_more_cells_and_the_next_stream_goes_on(shared) -> None:
    agent, script = shared
    script.reset([Call("execute_ipython_cell", {"code": "n = 0"})], ["zeroed"])
    await drive(agent.stream("zero"))
    agent.approvals.always(agent.agent_id)  # a standing approval: nothing waits for a person
    try:
        script.reset(*endless_cells())
        gen = agent.stream("keep counting")  # held in a variable: not finalized by the `break`
        async for event in gen:
            if isinstance(event, CodeExecutionOutput):
                break
        await asyncio.sleep(1.5)  # a turn that went on acting would run many cells meanwhile
        assert script.calls == 1, "no new model round after the consumer stopped reading"

        count = await asyncio.wait_for(cells_run(agent, script), 60)  # a new stream() ends the abandoned turn
        assert count == 1
        rest = [event async for event in gen]
        assert isinstance(rest[-1], RunCancelled)  # the old stream, if read again, says how it ended
    finally:
        agent.approvals.clear(agent.agent_id)


async def test_a_stream_left_before_its_calls_runs_none_of_them(shared, tmp_path: Path) -> None:
    agent, script = shared
    marker = tmp_path / "ran"
    agent.approvals.always(agent.agent_id)
    try:
        script.reset([Call("execute_ipython_cell", {"code": f"open({str(marker)!r}, 'w').close()"}, id="touch")])
        gen = agent.stream("touch")
        async for _ in gen:
            break  # at TurnStarted, before the model's response
        await asyncio.sleep(1.0)
        assert not marker.exists()
        script.reset(["next turn"])
        events = await drive(agent.stream("next"))
        assert events[-1].content == "next turn"
        assert not marker.exists()
        await gen.aclose()
    finally:
        agent.approvals.clear(agent.agent_id)


async def test_a_subagent_stops_acting_when_the_parents_consumer_leaves(tmp_path: Path) -> None:
    parent = Script([Call("task", {"prompt": "CHILD: count", "max_turns": 50}, id="t")], ["never"])
    child = Script(*endless_cells())
    router = Router({"PARENT": parent, "CHILD:": child})
    config = AgentConfig(model=router.model, working_dir=tmp_path, auto_approve=True, kernel_pool_size=0)
    async with Agent(config) as agent:
        gen = agent.stream("PARENT")
        async for event in gen:
            if isinstance(event, CodeExecutionOutput) and event.agent_id != agent.agent_id:
                break
        await asyncio.sleep(1.5)
        assert child.calls == 1, "the child asked its model again although nobody reads"
        await gen.aclose()  # ends the turn and the child


# -- what a cancelled turn leaves in the history ------------------------------------------------


async def test_cancel_keeps_the_finished_call_and_marks_the_running_one(shared) -> None:
    agent, script = shared
    slow = "import time\nkept = 'yes'\nprint('started', flush=True)\ntime.sleep(600)"
    script.reset(
        [
            Call("execute_ipython_cell", {"code": "print('fast')"}, id="fast"),
            Call("execute_ipython_cell", {"code": slow}, id="slow"),
        ],
        ["never"],
    )
    async for event in agent.stream("two cells"):
        if isinstance(event, ApprovalRequest):
            event.approve(True)
        if isinstance(event, CodeExecutionOutputChunk) and "started" in event.text:
            agent.cancel()
    last = interruption_of(agent)
    results = results_of(last)
    assert results["fast"] == "fast\n"
    assert "interrupted" in results["slow"] and "running" in results["slow"]
    assert results["slow"].endswith("What it had printed by then:\nstarted\n")  # the partial output reaches the model
    calls = agent.history[-2]
    assert isinstance(calls, ModelResponse) and [p.tool_call_id for p in calls.parts] == ["fast", "slow"]

    # the next request carries it all, and the kernel kept what the interrupted cell did
    script.reset([Call("execute_ipython_cell", {"code": "print(kept)"}, id="kept")], ["ok"])
    await drive(agent.stream("what happened?"))
    assert script.tool_results(1)["kept"] == "yes\n"
    prompts = [p.content for p in script.requests[0][-1].parts if isinstance(p, UserPromptPart)]
    assert "interrupted" in str(prompts[0]) and prompts[-1] == "what happened?"


async def test_cancel_while_waiting_for_approval_rejects_the_request(shared) -> None:
    agent, script = shared
    script.reset([Call("reset_kernel", {}, id="pending")], ["never"])
    requests: list[ApprovalRequest] = []
    async for event in agent.stream("reset please"):
        if isinstance(event, ApprovalRequest):
            requests.append(event)
            agent.cancel()
    (request,) = requests
    assert request.decided and request.decision is False  # nobody waits on it any more
    results = results_of(interruption_of(agent))
    assert "did not run" in results["pending"] and "interrupted" in results["pending"]


async def test_cancel_while_the_model_streams_keeps_the_prompt_and_the_note(shared) -> None:
    agent, script = shared
    before = agent.history
    script.reset(["partial", Block()])
    async for event in agent.stream("an interrupted question"):
        if isinstance(event, ResponseChunk):
            agent.cancel()
    last = interruption_of(agent)
    assert len(agent.history) in (len(before), len(before) + 1)
    assert "an interrupted question" in str(last)
    assert "partial" not in str(agent.history[len(before) - 1:])  # an unfinished response is not kept
