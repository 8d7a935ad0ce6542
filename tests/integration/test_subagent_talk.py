"""Talking to a running subagent: `task_send` from the parent's model, `Agent.send` from the person,
`task_report` from the child. Real kernels, scripted models; the request logs show what each agent read."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from freeact_sub import Agent, AgentEvent, ApprovalRequest, SubagentFinished, SubagentMessage, SubagentReport
from tests.scripting import Block, Call, Router, Script, auto_approved_without_pools, drive, of, tool_results

LIMIT = 120.0


config = auto_approved_without_pools


def new_prompts(messages: list[ModelMessage]) -> list[str]:
    """The user-prompt texts in the last message of a request (what is new to the model in it)."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    return [p.content for p in last.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)]


def child_id_of(messages: list[ModelMessage]) -> str:
    return re.search(r"agent-[0-9a-f]+", tool_results(messages)["task-bg"]).group(0)  # type: ignore[union-attr]


async def test_the_parent_sends_to_a_running_child_and_the_child_reports_back(workdir: Path) -> None:
    asking, release, reported = asyncio.Event(), asyncio.Event(), asyncio.Event()
    ids: dict[str, str] = {}

    def send(messages: list[ModelMessage]) -> list[Any]:
        ids["child"] = child_id_of(messages)
        message = {"agent_id": ids["child"], "message": "also count the vowels"}
        return [Block(asking), Call("task_send", message, id="send"),
                Call("task_send", {"agent_id": "agent-nope", "message": "hello"}, id="send-unknown")]

    def wait_for_it(messages: list[ModelMessage]) -> list[Any]:
        release.set()  # the child was mid-round when the message was sent: it reads it at its next one
        return [Block(reported), Call("task_output", {"agent_id": ids["child"], "wait": True, "timeout": 60}, id="out")]

    def first_round(messages: list[ModelMessage]) -> list[Any]:
        asking.set()  # the child's first round has begun: what is sent now waits for its next one
        return [Block(release), Call("task_report", {"text": "halfway: 3 files"}, id="report")]

    def answer(messages: list[ModelMessage]) -> list[str]:
        reported.set()
        return ["3 files, 5 vowels"]

    parent = Script([Call("task", {"prompt": "CHILD-bg: count files", "run_in_background": True}, id="task-bg")],
                    send, wait_for_it, ["done"])
    child = Script(first_round, answer)
    model = Router({"PARENT": parent, "CHILD-bg:": child}).model
    async with Agent(config(model, workdir)) as agent:
        async with asyncio.timeout(LIMIT):
            events = await drive(agent.stream("PARENT go"))
    child_id, main = ids["child"], agent.agent_id

    # what each agent was offered: task_send to the parent, task_report only to the child
    assert {"task_send"} <= {t.name for t in parent.infos[0].function_tools}
    assert "task_report" not in {t.name for t in parent.infos[0].function_tools}
    assert "task_report" in {t.name for t in child.infos[0].function_tools}
    # the child read the parent's message at its next round, attributed, not in the round it was in
    assert not any("also count the vowels" in p for p in new_prompts(child.requests[0]))
    assert new_prompts(child.requests[1]) == [
        f"[A message from your parent {main}, sent while you work:]\nalso count the vowels"
    ]
    assert "Sent to" in parent.tool_results(2)["send"]
    # an unknown id is refused at once: nobody was asked
    assert "There is no subagent 'agent-nope'" in parent.tool_results(2)["send-unknown"]
    assert "send-unknown" not in {e.tool_call_id for e in of(ApprovalRequest, events)}
    # the report reached the parent's next request, before the child's end
    assert new_prompts(parent.requests[3]) == [
        f"[The subagent {child_id} reports (it is still working):]\nhalfway: 3 files"
    ]
    assert "3 files, 5 vowels" in parent.tool_results(3)["out"]
    # events for both, attributed
    (message,) = of(SubagentMessage, events)
    assert (message.agent_id, message.subagent_id, message.sender, message.content) == (
        main, child_id, "parent", "also count the vowels")
    (report,) = of(SubagentReport, events)
    assert (report.agent_id, report.parent_id, report.content) == (child_id, main, "halfway: 3 files")


async def test_the_person_sends_between_turns_and_an_ended_child_is_refused_with_a_hint(workdir: Path) -> None:
    first, last = asyncio.Event(), asyncio.Event()
    ids: dict[str, str] = {}

    def send_to_ended(messages: list[ModelMessage]) -> list[Call]:
        return [Call("task_send", {"agent_id": ids["child"], "message": "more"}, id="late")]

    parent = Script([Call("task", {"prompt": "CHILD-bg: slow job", "run_in_background": True}, id="task-bg")],
                    ["started"], send_to_ended, ["ok"])
    child = Script([Block(first), Call("execute_ipython_cell", {"code": "print(1)"}, id="cell")],
                   [Block(last), "the answer"])
    model = Router({"PARENT": parent, "CHILD-bg:": child}).model
    seen: list[AgentEvent] = []
    async with Agent(config(model, workdir)) as agent:
        await drive(agent.stream("PARENT go"))
        ids["child"] = child_id = child_id_of(parent.requests[1])

        async def watch() -> None:
            async for event in agent.background_events():
                seen.append(event)

        watcher = asyncio.create_task(watch())
        agent.send(child_id, "use the metric system")
        with pytest.raises(ValueError, match="no running subagent 'agent-nope'"):
            agent.send("agent-nope", "hi")
        with pytest.raises(ValueError, match="empty"):
            agent.send(child_id, "  ")
        first.set()
        async with asyncio.timeout(LIMIT):
            while child.calls < 2:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
            agent.send(child_id, "too late")  # it is in its last round: it ends without reading this one
            last.set()
            while not of(SubagentFinished, seen):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        with pytest.raises(ValueError, match="no running subagent"):
            agent.send(child_id, "after the end")
        await drive(agent.stream("PARENT again"))
        watcher.cancel()

    told = [p for request in child.requests for p in new_prompts(request) if "metric" in p]
    assert told == ["[A message from the user, sent while you work:]\nuse the metric system"]
    assert [(m.sender, m.content, m.agent_id) for m in of(SubagentMessage, seen)] == [
        ("user", "use the metric system", agent.agent_id), ("user", "too late", agent.agent_id)]
    (note,) = new_prompts(parent.requests[2])[1:]
    assert "It ended before it read 1 message sent to it." in note and "the answer" in note
    late = parent.tool_results(3)["late"]
    assert "cannot read messages any more" in late and f'task(resume="{child_id}"' in late
