"""How a consumer leaves `stream()` decides what happens to the turn and the history."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import UserPromptPart

from freeact_sub import Agent, AgentConfig, ApprovalRequest, Response
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


async def test_breaking_out_mid_turn_cancels_it_and_restores_the_history(workdir: Path) -> None:
    script = Script(["Working on it", Block()], ["Fresh start."])
    config = AgentConfig(model=script.model, working_dir=workdir, enable_subagents=False)
    async with Agent(config) as agent:
        async for _ in agent.stream("first"):
            break  # leave while the model still streams; the turn is cancelled when the generator is dropped
        events = [e async for e in agent.stream("second")]
        assert [e.content for e in events if isinstance(e, Response)] == ["Fresh start."]
        assert "first" not in str(script.requests[1])  # the abandoned turn left nothing in the history
        assert len(agent.history) == 2


async def test_a_second_stream_while_one_is_consumed_is_refused(workdir: Path) -> None:
    script = Script(["Working on it", Block()])
    config = AgentConfig(model=script.model, working_dir=workdir, enable_subagents=False)
    async with Agent(config) as agent:
        first = agent.stream("first")
        await anext(first)
        with pytest.raises(RuntimeError, match="already running"):
            await anext(agent.stream("second"))
        await first.aclose()
        assert agent.history == []
