"""Bad input and faults in a turn: each gives a clear message, leaves the agent usable and nothing running.

Faults the model can correct become tool results (the next model request shows them); a model
that fails raises `ModelError` and leaves the history as it was before the turn; cancellation
yields `RunCancelled` and leaves the history saying that the turn was interrupted.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest

from freeact_sub import (
    Agent,
    ApprovalRequest,
    CodeExecutionOutput,
    CodeExecutionOutputChunk,
    ModelError,
    Response,
    ResponseChunk,
    RunCancelled,
    ToolOutput,
)
from tests.scripting import Block, Call, Fail, Script, drive, new_kernel_turn, of, shared_agent, single_agent_config

pytestmark = pytest.mark.asyncio(loop_scope="module")


shared = shared_agent("faults")


def assert_interrupted(agent: Agent, before: list) -> None:
    """The cancelled turn is in the history, ending with the note that the user interrupted it."""
    history = agent.history
    assert history[: len(before) - 1] == before[: len(before) - 1]  # earlier turns untouched (the last may be joined)
    last = history[-1]
    assert isinstance(last, ModelRequest) and "interrupted" in str(last.parts[-1])


async def still_works(agent: Agent, script: Script) -> None:
    """The agent runs a cell and answers after whatever happened before."""
    script.reset([Call("execute_ipython_cell", {"code": "print('still alive')"}, id="alive")], ["fine"])
    events = await drive(agent.stream("are you ok?"))
    assert script.tool_results(1) == {"alive": "still alive\n"}
    assert events[-1].content == "fine"


# -- bad tool calls become tool results --------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("run_python", {"code": "1"}, ["Unknown tool 'run_python'", "execute_ipython_cell", "reset_kernel"]),
        ("execute_ipython_cell", '{"code": "print(1)"', ["not valid JSON", "print(1)"]),
        ("execute_ipython_cell", '["print(1)"]', ["must be a JSON object"]),
        ("execute_ipython_cell", {}, ["'code' is a required property"]),
        ("execute_ipython_cell", {"code": 42}, ["code:", "42 is not of type 'string'"]),
        ("execute_ipython_cell", {"code": "1", "language": "r"}, ["'language' was unexpected"]),
        ("reset_kernel", {"hard": True}, ["'hard' was unexpected"]),
    ],
    ids=["unknown-tool", "invalid-json", "not-an-object", "missing-argument", "mistyped-argument",
         "extra-argument", "argument-to-a-tool-without-arguments"],
)
async def test_a_bad_call_is_answered_with_what_is_wrong(shared, name: str, args: object, expected: list[str]) -> None:
    agent, script = shared
    script.reset([Call(name, args, id="bad")], ["I will fix it."])
    events = await drive(agent.stream("do it"), decide=lambda r: pytest.fail(f"a bad call was put up: {r}"))
    assert not of(ApprovalRequest, events)  # nothing to approve: it cannot run
    errors = of(ToolOutput, events)
    assert len(errors) == 1 and errors[0].is_error and errors[0].tool_call_id == "bad"
    result = script.tool_results(1)["bad"]
    assert result == errors[0].content
    for text in expected:
        assert text in result, result
    assert events[-1].content == "I will fix it."  # the loop went on
    await still_works(agent, script)


async def test_a_bad_call_next_to_a_good_one(shared) -> None:
    agent, script = shared
    script.reset(
        [Call("nope", {}, id="bad"), Call("execute_ipython_cell", {"code": "print('good')"}, id="good")],
        ["ok"],
    )
    await drive(agent.stream("two calls"))
    results = script.tool_results(1)
    assert "Unknown tool 'nope'" in results["bad"]
    assert results["good"] == "good\n"


# -- cells that fail ---------------------------------------------------------------------------


async def test_a_cell_that_raises_returns_its_traceback(shared) -> None:
    agent, script = shared
    script.reset(
        [Call("execute_ipython_cell", {"code": "numbers = [1, 2]\nnumbers[5]"}, id="raise")],
        [Call("execute_ipython_cell", {"code": "print(numbers[-1])"}, id="fixed")],
        ["fixed it"],
    )
    events = await drive(agent.stream("index"))
    failed = of(CodeExecutionOutput, events)[0]
    assert failed.status == "error"
    result = script.tool_results(1)["raise"]
    assert "IndexError" in result and "list index out of range" in result
    assert "numbers[5]" in result
    assert script.tool_results(2)["fixed"] == "2\n"  # state from the failing cell survived


async def test_a_cell_that_never_ends_times_out_and_the_kernel_stays_usable(shared) -> None:
    agent, script = shared
    agent.config.execution_timeout = 1
    try:
        script.reset(
            [Call("execute_ipython_cell", {"code": "kept = 'yes'\nwhile True:\n    pass"}, id="loop")],
            [Call("execute_ipython_cell", {"code": "print(kept)"}, id="after")],
            ["ok"],
        )
        pid = agent.kernel.pid
        events = await drive(agent.stream("spin"))
    finally:
        agent.config.execution_timeout = 300
    assert of(CodeExecutionOutput, events)[0].status == "timeout"
    assert "timed out after 1 s" in script.tool_results(1)["loop"]
    assert script.tool_results(2)["after"] == "yes\n"
    assert agent.kernel.pid == pid


async def test_a_kernel_that_dies_is_restarted_and_the_model_is_told(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = Script(
        [Call("execute_ipython_cell", {"code": "state = 1\nimport os\nos._exit(1)"}, id="die")],
        [Call("execute_ipython_cell", {"code": "print('state' in globals())"}, id="after")],
        ["ok"],
    )
    events = await new_kernel_turn(script, tmp_path, "crash")
    assert of(CodeExecutionOutput, events)[0].status == "kernel_died"
    told = script.tool_results(1)["die"]
    assert "died" in told and "lost" in told
    assert script.tool_results(2)["after"] == "False\n"
    # a program's log says why the kernel was restarted, with how its process ended
    assert "it died while a cell ran (exit code 1)" in caplog.text


# -- a failing model ---------------------------------------------------------------------------


async def test_a_model_that_raises_mid_stream(shared) -> None:
    agent, script = shared
    before = agent.history
    script.reset(["Let me", Fail(ConnectionError("provider went away"))])
    seen = []
    with pytest.raises(ModelError, match="provider went away"):
        async for event in agent.stream("hello"):
            seen.append(event)
    assert [e.content for e in of(ResponseChunk, seen)] == ["Let me"]
    assert agent.history == before
    await still_works(agent, script)
    # the failed turn left nothing in what the model sees next
    assert "hello" not in str(script.requests[0])
    assert "Let me" not in str(script.requests[0])


async def test_a_model_that_fails_after_a_tool_call_restores_the_history(shared) -> None:
    agent, script = shared
    before = agent.history
    script.reset(
        [Call("execute_ipython_cell", {"code": "after_fail = 1"})],
        [Fail(RuntimeError("rate limited"))],
    )
    with pytest.raises(ModelError, match="rate limited"):
        await drive(agent.stream("go"))
    assert agent.history == before
    await still_works(agent, script)


# -- cancellation ------------------------------------------------------------------------------


async def test_cancel_while_the_model_streams(shared) -> None:
    agent, script = shared
    before = agent.history
    script.reset(["I am think", Block()])  # the model never finishes on its own
    events = []
    async for event in agent.stream("long answer"):
        events.append(event)
        if isinstance(event, ResponseChunk):
            agent.cancel()
    assert isinstance(events[-1], RunCancelled)
    assert events[-1].agent_id == agent.agent_id
    assert not of(Response, events)
    assert_interrupted(agent, before)
    await still_works(agent, script)


async def test_cancel_while_waiting_for_approval(shared, tmp_path: Path) -> None:
    agent, script = shared
    before = agent.history
    marker = tmp_path / "ran"
    script.reset([Call("execute_ipython_cell", {"code": f"open({str(marker)!r}, 'w').close()"})], ["never"])
    events = []
    async for event in agent.stream("wait"):
        events.append(event)
        if isinstance(event, ApprovalRequest):
            agent.cancel()  # no decision is ever made
    assert isinstance(events[-1], RunCancelled)
    assert not marker.exists()
    assert_interrupted(agent, before)
    assert script.calls == 1
    await still_works(agent, script)


async def test_cancel_a_running_cell(shared) -> None:
    agent, script = shared
    before = agent.history
    code = "survives = 'yes'\nimport time\nprint('started', flush=True)\ntime.sleep(600)"
    script.reset([Call("execute_ipython_cell", {"code": code})], ["never"])
    events = []
    async for event in agent.stream("sleep"):
        events.append(event)
        if isinstance(event, ApprovalRequest):
            event.approve(True)
        if isinstance(event, CodeExecutionOutputChunk) and "started" in event.content:
            agent.cancel()
    assert isinstance(events[-1], RunCancelled)
    assert_interrupted(agent, before)
    # the cell was interrupted, not left running: the next cell runs at once, on the same state
    script.reset([Call("execute_ipython_cell", {"code": "print(survives)"}, id="next")], ["ok"])
    await asyncio.wait_for(drive(agent.stream("next")), 60)
    assert script.tool_results(1)["next"] == "yes\n"


async def test_a_consumer_that_gives_up_cancels_the_turn(shared) -> None:
    # e.g. the consumer wraps the turn in a timeout of its own
    agent, script = shared
    before = agent.history
    script.reset(["slow", Block()])
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(drive(agent.stream("slow")), 0.5)
    assert_interrupted(agent, before)
    await still_works(agent, script)


async def test_cancel_when_no_turn_runs_is_harmless(shared) -> None:
    agent, script = shared
    agent.cancel()
    await still_works(agent, script)


async def test_stop_during_a_turn_ends_it(tmp_path: Path) -> None:
    script = Script([Call("execute_ipython_cell", {"code": "import time\nprint('go', flush=True)\ntime.sleep(600)"})])
    agent = Agent(single_agent_config(script, tmp_path))
    await agent.start()
    events = []
    try:
        async for event in agent.stream("run"):
            events.append(event)
            if isinstance(event, ApprovalRequest):
                event.approve(True)
            if isinstance(event, CodeExecutionOutputChunk):
                await agent.stop()
    finally:
        await agent.stop()
    assert isinstance(events[-1], RunCancelled)
    assert not agent.started
