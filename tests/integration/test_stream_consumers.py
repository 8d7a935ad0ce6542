"""How a consumer leaves `stream()` decides what happens to the turn and the history."""

from __future__ import annotations

import contextlib
from pathlib import Path

from pydantic_ai.messages import UserPromptPart

from freeact_sub import Agent, AgentConfig, ApprovalRequest, Response, RunCancelled
from tests.scripting import Block, Call, Script


async def test_breaking_out_after_the_final_answer_keeps_the_turn(workdir: Path) -> None:
    script = Script(
        [Call("execute_ipython_cell", {"code": "x = 41"})],
        ["x is set."],
        ["Still here."],
    )
    config = AgentConfig(model=script.model, working_dir=workdir, enable_subagents=False)
    async with Agent(config) as agent:
        async for event in agent.stream("set x"):
            if isinstance(event, ApprovalRequest):
                event.approve(True)
            if isinstance(event, Response) and event.final:
                break
        assert len(agent.history) == 4  # prompt, call, result, answer
        async for _ in agent.stream("and now?"):
            pass
        # the second turn's request carried the whole first turn along
        prompts = [
            part.content
            for message in script.requests[2]
            for part in message.parts
            if isinstance(part, UserPromptPart)
        ]
        assert prompts == ["set x", "and now?"]
        assert "x is set." in str(script.requests[2])


async def test_breaking_out_mid_turn_cancels_it_and_says_so_in_the_history(workdir: Path) -> None:
    script = Script(["Working on it", Block()], ["Fresh start."])
    config = AgentConfig(model=script.model, working_dir=workdir, enable_subagents=False)
    async with Agent(config) as agent:
        async for _ in agent.stream("first"):
            break  # leave while the model still streams; the next stream() ends the turn
        events = [e async for e in agent.stream("second")]
        assert [e.content for e in events if isinstance(e, Response)] == ["Fresh start."]
        prompts = [p.content for p in script.requests[1][-1].parts if isinstance(p, UserPromptPart)]
        assert prompts[0] == "first" and "interrupted" in str(prompts[1]) and prompts[-1] == "second"
        assert "Working on it" not in str(script.requests[1])  # an unfinished response is not kept
        assert len(agent.history) == 2


async def test_a_second_stream_ends_the_first(workdir: Path) -> None:
    script = Script(["Working on it", Block()], ["Second."])
    config = AgentConfig(model=script.model, working_dir=workdir, enable_subagents=False)
    async with Agent(config) as agent:
        first = agent.stream("first")
        await anext(first)
        assert [e.content async for e in agent.stream("second") if isinstance(e, Response)] == ["Second."]
        assert isinstance([e async for e in first][-1], RunCancelled)


async def test_closing_with_aclosing_ends_the_turn_at_once(workdir: Path) -> None:
    script = Script([Call("execute_ipython_cell", {"code": "x = 1"})], ["never"])
    config = AgentConfig(model=script.model, working_dir=workdir, enable_subagents=False, auto_approve=True)
    async with Agent(config) as agent:
        async with contextlib.aclosing(agent.stream("go")) as events:
            async for _ in events:
                break
        assert not agent.turns.running  # nothing of the turn is left running
        assert script.calls == 1
