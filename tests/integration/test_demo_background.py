"""A background subagent end to end over the scripted provider server (OpenAI protocol, so pydantic-ai's real
provider code runs): its question arrives after the parent's turn ended and is answered through
`agent.background_events()`; the next turn's request tells the parent once that it ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from freeact_sub import Agent, AgentEvent, ApprovalRequest, Response, SubagentFinished, SubagentStarted, ToolOutput
from freeact_sub.demo import demo_config, start_demo_server

LIMIT = 120.0
NOTE = "[The background subagent "


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, Mapping))


def _notes(request: Mapping[str, Any]) -> list[str]:
    """The user messages of one model request that tell of an ended background subagent."""
    return [text for m in request["messages"] if m.get("role") == "user"
            and (text := _text(m.get("content"))).startswith(NOTE)]


def _is_main(request: Mapping[str, Any]) -> bool:
    return any(t.get("function", {}).get("name") == "task" for t in request.get("tools") or [])


async def _turn(agent: Agent, prompt: str) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    async with asyncio.timeout(LIMIT):
        async for event in agent.stream(prompt):
            events.append(event)
            if isinstance(event, ApprovalRequest) and not event.decided:
                assert event.agent_id == agent.agent_id, "only the main agent asks during its turns"
                event.approve(True)
    return events


def _answer(agent: Agent, events: list[AgentEvent]) -> str:
    (final,) = [e.content for e in events if isinstance(e, Response) and e.final and e.agent_id == agent.agent_id]
    return final


async def test_a_background_subagent_asks_between_turns_and_its_end_is_told_once(workdir: Path) -> None:
    with start_demo_server() as server:
        async with Agent(demo_config(server, working_dir=workdir, kernel_pool_size=0)) as agent:
            first = await _turn(agent, "Count some words in the background, please.")
            (started,) = [e for e in first if isinstance(e, SubagentStarted)]
            child = started.subagent_id
            assert started.description == "count words in the background"
            (result,) = [e for e in first if isinstance(e, ToolOutput) and e.tool_name == "task"]
            assert child in result.content and "in the background" in result.content
            assert "runs in the background" in _answer(agent, first)
            assert not [e for e in first if isinstance(e, SubagentFinished)]
            requests_of_turn_one = len(server.requests)

            # between turns: the child's question reaches us through background_events(); we answer it there
            between: list[AgentEvent] = []
            async with asyncio.timeout(LIMIT):
                async for event in agent.background_events():
                    between.append(event)
                    if isinstance(event, ApprovalRequest) and not event.decided:
                        assert event.agent_id == child and event.code is not None and "sentence" in event.code
                        event.approve(True)
                    if isinstance(event, SubagentFinished):
                        break
            asked = [e for e in between if isinstance(e, ApprovalRequest)]
            assert len(asked) == 1 and asked[0].decision is True
            (finished,) = [e for e in between if isinstance(e, SubagentFinished)]
            assert finished.subagent_id == child and finished.status == "done" and finished.agent_id == agent.agent_id
            assert finished.usage.output_tokens > 0

            second = await _turn(agent, "Any news from the background job?")
            assert _answer(agent, second) == (
                "The background subagent has ended. It reported: The sentence has 10 words."
            )
            third = await _turn(agent, "Anything else from the background?")
            assert _answer(agent, third) == "No background subagent has ended since I was last told."

    main_requests = [r for r in list(server.requests) if _is_main(r)]
    child_requests = [r for r in list(server.requests) if not _is_main(r)]
    assert all(not _notes(r) for r in child_requests)
    counts = [len(_notes(r)) for r in main_requests]
    # turn one: two requests without the note; turns two and three: one request each, the note once in each
    # (added to turn two's request, then part of the history: never added again)
    assert counts == [0, 0, 1, 1], counts
    (note,) = _notes(main_requests[2])
    assert note.startswith(f"{NOTE}{child} has ended (done)") and "The sentence has 10 words." in note
    assert requests_of_turn_one >= 2
