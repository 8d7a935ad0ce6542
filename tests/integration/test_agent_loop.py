"""The `stream()` loop with a real kernel and a scripted model: streaming, approvals, turns, history."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from pathlib import Path

import psutil
import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from freeact_sub import (
    Agent,
    ApprovalRequest,
    CodeExecutionOutput,
    CodeExecutionOutputChunk,
    Response,
    ResponseChunk,
    Thoughts,
    ThoughtsChunk,
    ToolOutput,
    RunCancelled,
    TurnStarted,
)
from tests.scripting import Block, Call, Script, Think, drive, new_kernel_turn, of, shared_agent, single_agent_config

pytestmark = pytest.mark.asyncio(loop_scope="module")

# a 1x1 red PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)


shared = shared_agent("shared")


# -- streaming ---------------------------------------------------------------------------------


async def test_text_and_thinking_stream_as_chunks(shared) -> None:
    agent, script = shared
    script.reset([Think("Let me "), Think("think."), "Hel", "lo ", "world"])
    events = await drive(agent.stream("Say hello"))
    assert isinstance(events[0], TurnStarted) and events[0].turn == 1
    assert [e.content for e in of(ThoughtsChunk, events)] == ["Let me ", "think."]
    assert [e.content for e in of(Thoughts, events)] == ["Let me think."]
    assert [e.content for e in of(ResponseChunk, events)] == ["Hel", "lo ", "world"]
    responses = of(Response, events)
    assert [(r.content, r.final) for r in responses] == [("Hello world", True)]
    assert events[-1] is responses[-1]
    assert {event.agent_id for event in events} == {agent.agent_id}


async def test_chunks_arrive_before_the_model_finishes(shared) -> None:
    # the model blocks after its first chunk until the consumer has seen that chunk
    agent, script = shared
    seen_first = asyncio.Event()

    script.reset(["first ", Block(seen_first), "second"])
    events = []
    async for event in agent.stream("stream please"):
        events.append(event)
        if isinstance(event, ResponseChunk) and event.content == "first ":
            seen_first.set()
    assert of(Response, events)[-1].content == "first second"


async def test_tools_come_from_the_json_definitions(shared) -> None:
    agent, script = shared
    script.reset(["ok"])
    await drive(agent.stream("hi"))
    offered = {tool.name: tool for tool in script.infos[0].function_tools}
    assert set(offered) == {"execute_ipython_cell", "reset_kernel"}
    assert offered["execute_ipython_cell"].parameters_json_schema["required"] == ["code"]
    assert agent.tool_names == ["execute_ipython_cell", "reset_kernel"]


# -- tool calls and approvals ------------------------------------------------------------------


async def test_an_approved_cell_runs_and_its_output_goes_back_to_the_model(shared) -> None:
    agent, script = shared
    script.reset(
        ["Computing.", Call("execute_ipython_cell", {"code": "print(6 * 7)"}, id="c1")],
        ["It is 42."],
    )
    events = await drive(agent.stream("What is 6*7?"))
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ApprovalRequest") < kinds.index("CodeExecutionOutputChunk") < kinds.index("CodeExecutionOutput")
    request = of(ApprovalRequest, events)[0]
    assert (request.tool_name, request.tool_args, request.tool_call_id) == (
        "execute_ipython_cell",
        {"code": "print(6 * 7)"},
        "c1",
    )
    assert request.code == "print(6 * 7)"
    assert not request.auto_approved
    output = of(CodeExecutionOutput, events)[0]
    assert (output.text, output.status, output.tool_call_id) == ("42\n", "ok", "c1")
    assert [c.tool_call_id for c in of(CodeExecutionOutputChunk, events)] == ["c1"]
    assert script.tool_results(1) == {"c1": "42\n"}
    assert [(r.content, r.final) for r in of(Response, events)] == [("Computing.", False), ("It is 42.", True)]
    assert [e.turn for e in of(TurnStarted, events)] == [1, 2]


async def test_a_rejected_call_does_not_run_and_ends_the_turn(shared, tmp_path: Path) -> None:
    agent, script = shared
    marker = tmp_path / "ran"
    script.reset([Call("execute_ipython_cell", {"code": f"open({str(marker)!r}, 'w').close()"}, id="r1")])
    events = await drive(agent.stream("Touch a file"), decide=False)
    assert not marker.exists()
    assert not of(CodeExecutionOutput, events)
    final = events[-1]
    assert isinstance(final, Response) and final.final
    assert "rejected" in final.content and "execute_ipython_cell" in final.content
    assert agent.turns.last_turn_rejected
    assert script.calls == 1  # the model was not asked again

    # the next turn tells the model what happened to its call
    script.reset(["Understood."])
    await drive(agent.stream("Never mind"))
    assert not agent.turns.last_turn_rejected
    history_results = [
        part.content
        for message in script.requests[0]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if getattr(part, "tool_call_id", None) == "r1"
    ]
    assert history_results and "rejected" in history_results[0]


async def test_one_rejected_call_of_several_ends_the_turn_after_the_others_ran(shared) -> None:
    agent, script = shared
    script.reset(
        [
            Call("execute_ipython_cell", {"code": "print('approved')"}, id="yes"),
            Call("reset_kernel", {}, id="no"),
        ]
    )
    events = await drive(agent.stream("two"), decide=lambda request: request.tool_call_id == "yes")
    assert [o.text for o in of(CodeExecutionOutput, events)] == ["approved\n"]
    assert not of(ToolOutput, events)  # reset_kernel did not run
    assert "`reset_kernel`" in events[-1].content and "execute_ipython_cell" not in events[-1].content
    assert script.calls == 1
    results = {
        part.tool_call_id: part.content
        for message in agent.history[-2:-1]
        for part in message.parts
        if part.part_kind == "tool-return"
    }
    assert results["yes"] == "approved\n"
    assert "rejected" in results["no"]


async def test_approval_requests_can_be_answered_from_another_task(shared) -> None:
    agent, script = shared
    script.reset([Call("execute_ipython_cell", {"code": "print('later')"})], ["done"])
    events = []

    async def answer_later(request: ApprovalRequest) -> None:
        await asyncio.sleep(0.05)
        request.approve(True)

    answerers = []
    async for event in agent.stream("go"):
        events.append(event)
        if isinstance(event, ApprovalRequest):
            answerers.append(asyncio.create_task(answer_later(event)))
    await asyncio.gather(*answerers)
    assert of(CodeExecutionOutput, events)[0].text == "later\n"


async def test_all_calls_of_one_response_are_put_up_for_approval_together(shared) -> None:
    # nothing is approved until both requests have arrived: a loop that handled the calls one
    # by one would never emit the second request, and the test would time out
    agent, script = shared
    script.reset(
        [
            Call("execute_ipython_cell", {"code": "print('one')"}, id="p1"),
            Call("execute_ipython_cell", {"code": "print('two')"}, id="p2"),
        ],
        ["both ran"],
    )
    pending: list[ApprovalRequest] = []
    events = []

    async def consume() -> None:
        async for event in agent.stream("two cells"):
            events.append(event)
            if isinstance(event, ApprovalRequest):
                pending.append(event)
                if len(pending) == 2:
                    for request in pending:
                        request.approve(True)

    await asyncio.wait_for(consume(), 60)
    outputs = {o.tool_call_id: o.text for o in of(CodeExecutionOutput, events)}
    assert outputs == {"p1": "one\n", "p2": "two\n"}
    assert script.tool_results(1) == {"p1": "one\n", "p2": "two\n"}


async def test_cells_of_one_response_are_serialized_on_the_kernel(shared) -> None:
    agent, script = shared
    log = agent.config.working_dir / "serialized.log"  # where the kernel's sandbox lets it write
    log.unlink(missing_ok=True)

    def cell(name: str) -> str:
        return (
            "import time\n"
            f"open({str(log)!r}, 'a').write('start {name}\\n')\n"
            "time.sleep(0.2)\n"
            f"open({str(log)!r}, 'a').write('end {name}\\n')"
        )

    script.reset([Call("execute_ipython_cell", {"code": cell(n)}) for n in "abc"], ["ok"])
    await drive(agent.stream("three cells"))
    lines = log.read_text().splitlines()
    assert len(lines) == 6
    for i in range(0, 6, 2):  # every start is followed by its own end
        assert lines[i].replace("start", "end") == lines[i + 1]


async def test_a_cell_that_prints_nothing_says_so(shared) -> None:
    agent, script = shared
    script.reset([Call("execute_ipython_cell", {"code": "quiet = 1"}, id="q")], ["ok"])
    await drive(agent.stream("quiet"))
    assert script.tool_results(1)["q"] == "(the cell ran and printed nothing)"


async def test_long_output_is_shortened_for_the_model_but_not_for_the_consumer(shared) -> None:
    agent, script = shared
    code = "print('HEAD' + 'x' * 50_000 + 'TAIL')"
    script.reset([Call("execute_ipython_cell", {"code": code}, id="long")], ["ok"])
    events = await drive(agent.stream("a lot of output"))
    full = of(CodeExecutionOutput, events)[0].text
    assert len(full) > 50_000
    seen = script.tool_results(1)["long"]
    assert len(seen) <= agent.config.max_output_chars + 200
    assert seen.startswith("HEAD") and seen.rstrip().endswith("TAIL")
    assert "characters of output left out" in seen


async def test_images_are_saved_and_named_in_the_result(shared) -> None:
    agent, script = shared
    code = (
        "import base64\nfrom IPython.display import Image, display\n"
        f"display(Image(data=base64.b64decode({base64.b64encode(PNG).decode()!r})))"
    )
    script.reset([Call("execute_ipython_cell", {"code": code}, id="img")], ["ok"])
    events = await drive(agent.stream("draw"))
    output = of(CodeExecutionOutput, events)[0]
    assert len(output.images) == 1
    image = output.images[0]
    assert image.read_bytes() == PNG
    assert image.is_relative_to(agent.config.resolved_images_dir)
    assert agent.agent_id in image.name
    assert str(image) in script.tool_results(1)["img"]


# -- standing approvals ------------------------------------------------------------------------


async def test_a_standing_approval_is_still_emitted_as_a_decided_request(shared) -> None:
    agent, script = shared
    agent.approvals.always(agent.agent_id)
    try:
        script.reset([Call("execute_ipython_cell", {"code": "print('auto')"})], ["ok"])
        events = await drive(agent.stream("auto"), decide=lambda r: pytest.fail(f"asked for {r}"))
    finally:
        agent.approvals.clear(agent.agent_id)
    request = of(ApprovalRequest, events)[0]
    assert request.auto_approved and request.decided
    assert await request.approved() is True
    assert of(CodeExecutionOutput, events)[0].text == "auto\n"

    # cleared: the next call waits for a decision again
    script.reset([Call("execute_ipython_cell", {"code": "print('asked')"})], ["ok"])
    asked: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    await drive(agent.stream("ask me"), decide=decide)
    assert len(asked) == 1 and not asked[0].auto_approved


async def test_a_standing_approval_for_another_agent_does_not_apply(shared) -> None:
    agent, script = shared
    agent.approvals.always("agent-someone-else")
    try:
        script.reset([Call("execute_ipython_cell", {"code": "print(1)"})], ["ok"])
        events = await drive(agent.stream("x"), decide=True)
    finally:
        agent.approvals.clear("agent-someone-else")
    assert not of(ApprovalRequest, events)[0].auto_approved


async def test_approve_everything(shared) -> None:
    agent, script = shared
    agent.approvals.always_all()
    try:
        script.reset([Call("execute_ipython_cell", {"code": "print('all')"})], ["ok"])
        events = await drive(agent.stream("x"), decide=lambda r: pytest.fail("asked"))
    finally:
        agent.approvals.clear_all()
    assert of(ApprovalRequest, events)[0].auto_approved


# -- turns and history -------------------------------------------------------------------------


async def test_max_turns_stops_the_loop(shared) -> None:
    agent, script = shared
    script.reset(
        ["first", Call("execute_ipython_cell", {"code": "print(1)"})],
        ["second", Call("execute_ipython_cell", {"code": "print(2)"})],
        ["third", Call("execute_ipython_cell", {"code": "print(3)"})],
    )
    events = await drive(agent.stream("loop", max_turns=2))
    assert script.calls == 2
    assert agent.turns.turns_used == 2 and agent.turns.turn_limit_reached
    assert [e.turn for e in of(TurnStarted, events)] == [1, 2]
    final = events[-1]
    assert isinstance(final, Response) and final.final
    assert "limit of 2 turns" in final.content
    assert final.content.startswith("second")

    # the next turn goes on from there: the new prompt follows the last tool results
    script.reset(["fine"])
    await drive(agent.stream("continue"))
    assert not agent.turns.turn_limit_reached
    last = script.requests[0][-1]
    assert isinstance(last, ModelRequest)
    kinds = [part.part_kind for part in last.parts]
    assert kinds == ["tool-return", "user-prompt"]


async def test_max_turns_from_the_config(shared) -> None:
    agent, script = shared
    agent.config.max_turns = 1
    try:
        script.reset([Call("execute_ipython_cell", {"code": "print(1)"})], ["never asked"])
        events = await drive(agent.stream("x"))
    finally:
        agent.config.max_turns = None
    assert script.calls == 1
    assert "limit of 1 turn" in events[-1].content


async def test_the_conversation_and_kernel_state_persist_across_turns(tmp_path: Path) -> None:
    script = Script(
        [Call("execute_ipython_cell", {"code": "remembered = 41"})],
        ["Stored it."],
        [Call("execute_ipython_cell", {"code": "print(remembered + 1)"}, id="again")],
        ["42"],
    )
    async with Agent(single_agent_config(script, tmp_path)) as agent:
        await drive(agent.stream("Remember 41"))
        await drive(agent.stream("Add one"))
        history = agent.history
    second_turn = script.requests[2]
    prompts = [
        part.content for m in second_turn if isinstance(m, ModelRequest) for part in m.parts
        if isinstance(part, UserPromptPart)
    ]
    assert prompts == ["Remember 41", "Add one"]
    texts = [part.content for m in second_turn if isinstance(m, ModelResponse) for part in m.parts
             if isinstance(part, TextPart)]
    assert "Stored it." in texts
    assert script.tool_results(3) == {"again": "42\n"}
    assert len(history) == 8  # 2 turns x (request, tool call, tool result, answer)


async def test_an_empty_model_response_ends_the_turn(shared) -> None:
    agent, script = shared
    script.reset([""])
    events = await drive(agent.stream("say nothing"))
    assert isinstance(events[-1], Response) and events[-1].final and events[-1].content == ""


async def test_the_system_prompt_comes_first(tmp_path: Path) -> None:
    script = Script(["hi"])
    async with Agent(single_agent_config(script, tmp_path, system_prompt="You are a test.")) as agent:
        await drive(agent.stream("hello"))
    first = script.requests[0][0]
    assert isinstance(first, ModelRequest)
    assert first.parts[0].part_kind == "system-prompt"
    assert first.parts[0].content == "You are a test."


# -- lifecycle ---------------------------------------------------------------------------------


async def test_stream_needs_a_started_agent(tmp_path: Path) -> None:
    agent = Agent(single_agent_config(Script(), tmp_path))
    with pytest.raises(RuntimeError, match="not running"):
        async for _ in agent.stream("hi"):
            pass


async def test_a_new_stream_ends_the_unfinished_turn(shared) -> None:
    agent, script = shared
    script.reset(["waiting", Block()], ["second answer"])
    first = agent.stream("first")
    assert isinstance(await anext(first), TurnStarted)
    events = await drive(agent.stream("second"))
    assert events[-1].content == "second answer"
    rest = [event async for event in first]
    assert isinstance(rest[-1], RunCancelled)  # its consumer learns that the turn was ended


async def test_start_and_stop_without_a_context_manager(tmp_path: Path) -> None:
    script = Script([Call("execute_ipython_cell", {"code": "print('x')"})], ["ok"])
    agent = Agent(single_agent_config(script, tmp_path))
    await agent.start()
    try:
        assert agent.started and agent.kernel is not None
        pid = agent.kernel.pid
        await drive(agent.stream("go"))
    finally:
        await agent.stop()
    assert not agent.started and agent.kernel is None
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    await agent.stop()  # stopping twice is harmless


async def test_the_kernel_does_not_get_the_hosts_api_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-host")
    code = "import os\nprint(os.environ.get('OPENAI_API_KEY'), os.environ.get('ALLOWED'))"
    script = Script([Call("execute_ipython_cell", {"code": code}, id="env")], ["ok"])
    async with Agent(single_agent_config(script, tmp_path, kernel_env={"ALLOWED": "granted"})) as agent:
        await drive(agent.stream("env"))
    assert script.tool_results(1)["env"] == "None granted\n"


async def test_breaking_out_of_the_loop_ends_the_turn(shared, tmp_path: Path) -> None:
    agent, script = shared
    marker = tmp_path / "ran"
    before = agent.history
    script.reset([Call("execute_ipython_cell", {"code": f"open({str(marker)!r}, 'w').close()"}, id="touch")])
    async with contextlib.aclosing(agent.stream("go")) as events:
        async for event in events:
            if isinstance(event, ApprovalRequest):
                break
    assert not marker.exists()
    # the history says what happened: the call did not run, the turn was interrupted
    new = agent.history[len(before):]
    assert "did not run" in str(new[-1]) and "interrupted" in str(new[-1])
    script.reset(["still here"])
    events = await drive(agent.stream("again"))
    assert events[-1].content == "still here"


async def test_tool_output_of_reset_kernel_is_emitted(tmp_path: Path) -> None:
    script = Script(
        [Call("execute_ipython_cell", {"code": "gone = 1"})],
        [Call("reset_kernel", None, id="reset")],  # no arguments at all
        [Call("execute_ipython_cell", {"code": "print('gone' in globals())"}, id="check")],
        ["clean"],
    )
    events = await new_kernel_turn(script, tmp_path, "reset it")
    outputs = of(ToolOutput, events)
    assert [(o.tool_name, o.tool_call_id, o.is_error) for o in outputs] == [("reset_kernel", "reset", False)]
    assert "restarted" in outputs[0].content
    assert "restarted" in script.tool_results(2)["reset"]
    assert script.tool_results(3)["check"] == "False\n"
