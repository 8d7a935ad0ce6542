"""Subagent lifecycle: background children, stopping one child, resume and fork, budgets, depth.

Real kernels, scripted models (`Router` picks a script by the conversation's first prompt).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from freeact_sub import Agent, AgentEvent, ApprovalRequest, Response, SubagentFinished, SubagentStarted, ToolOutput
from tests.processes import kernel_processes
from tests.scripting import Block, Call, Router, Script, auto_approved_without_pools, drive, of, tool_results

LIMIT = 120.0


config = auto_approved_without_pools


def prompts(messages: list[ModelMessage]) -> list[str]:
    """Every user prompt text the model was sent, in order."""
    return [p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts
            if isinstance(p, UserPromptPart) and isinstance(p.content, str)]


def notes_in(script: Script) -> list[list[str]]:
    """Per request: the background notes it carried in its last message (new to that request)."""
    seen: list[list[str]] = []
    for messages in script.requests:
        last = messages[-1]
        seen.append([p.content for p in last.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)
                     and p.content.startswith("[The background subagent")])
    return seen


def task(name: str, **args: Any) -> Call:
    return Call("task", {"prompt": f"CHILD-{name}: job", **args}, id=f"task-{name}")


async def test_background_child_asks_between_turns_and_the_parent_is_told_once(workdir: Path) -> None:
    release = asyncio.Event()
    parent = Script(
        [task("bg", run_in_background=True)], ["It runs in the background."],  # turn 1
        ["Next turn."],  # turn 2: the note arrives with this request
        ["Third turn, nothing new."],  # turn 3
    )
    child = Script([Block(release), Call("execute_ipython_cell", {"code": "print(6 * 7)"}, id="bg-cell")],
                   ["forty-two"])
    model = Router({"PARENT": parent, "CHILD-bg:": child}).model
    async with Agent(config(model, workdir, auto_approve=False)) as agent:
        events = await drive(agent.stream("PARENT one"))
        (result,) = [e for e in of(ToolOutput, events) if e.tool_call_id == "task-bg"]
        child_id = next(e.agent_id for e in agent.subagents())
        assert child_id in result.content and "background" in result.content
        assert [i.background for i in agent.subagents()] == [True]
        # the parent's turn is over; the child now asks, and the question reaches the consumer at once
        seen: list[AgentEvent] = []

        async def watch() -> None:
            async for event in agent.background_events():
                seen.append(event)
                if isinstance(event, ApprovalRequest) and not event.decided:
                    assert event.agent_id == child_id
                    event.approve(True)

        watcher = asyncio.create_task(watch())
        release.set()
        async with asyncio.timeout(LIMIT):
            while not any(isinstance(e, SubagentFinished) for e in seen):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert [e.tool_call_id for e in of(ApprovalRequest, seen)] == ["bg-cell"]
        (finished,) = of(SubagentFinished, seen)
        assert finished.status == "done" and finished.agent_id == agent.agent_id
        assert agent.subagents() == []

        await drive(agent.stream("PARENT two"))
        await drive(agent.stream("PARENT three"))
        watcher.cancel()
    notes = notes_in(parent)
    assert [len(n) for n in notes] == [0, 0, 1, 0], notes
    assert child_id in notes[2][0] and "forty-two" in notes[2][0]


async def test_two_background_results_are_told_exactly_once_each(workdir: Path) -> None:
    parent = Script(
        [task("a", run_in_background=True), task("b", run_in_background=True)],
        [Call("task_output", {"agent_id": "placeholder"}, id="bad-output"), Call("task_list", {}, id="list")],
        [Call("execute_ipython_cell", {"code": "import time; time.sleep(3)"}, id="wait")],
        ["done"],
        ["next turn"],
    )
    children = {f"CHILD-{n}:": Script([f"answer {n}"]) for n in "ab"}
    model = Router({"PARENT": parent, **children}).model
    async with Agent(config(model, workdir)) as agent:
        finished = of(SubagentFinished, await drive(agent.stream("PARENT go")))
        # both may end during the first turn or after it (then their events come between turns): told once either way
        async with asyncio.timeout(LIMIT):
            events = agent.background_events()
            while len(finished) < 2:
                finished += of(SubagentFinished, [await anext(events)])
        await drive(agent.stream("PARENT again"))
    all_notes = [note for request in notes_in(parent) for note in request]
    assert len(all_notes) == 2 and {"answer a" in all_notes[0] or "answer a" in all_notes[1]} == {True}
    assert sum("answer b" in n for n in all_notes) == 1
    refused = parent.tool_results(2)["bad-output"]
    assert "no subagent 'placeholder'" in refused
    listing = parent.tool_results(2)["list"]
    assert listing.count("agent-") == 2


async def test_cancel_subagent_stops_one_child_and_the_turn_goes_on(workdir: Path) -> None:
    parent = Script([task("slow"), task("quick")], ["parent done"])
    slow = Script([Call("execute_ipython_cell", {"code": "import time; time.sleep(60)"}, id="slow-cell")], ["never"])
    quick = Script([Call("execute_ipython_cell", {"code": "print('quick')"}, id="quick-cell")], ["quick answer"])
    model = Router({"PARENT": parent, "CHILD-slow:": slow, "CHILD-quick:": quick}).model
    events: list[AgentEvent] = []
    async with Agent(config(model, workdir)) as agent:
        async with asyncio.timeout(LIMIT):
            async for event in agent.stream("PARENT go"):
                events.append(event)
                if isinstance(event, ApprovalRequest) and event.tool_call_id == "slow-cell":
                    slow_id = event.agent_id
                    assert [i.state for i in agent.subagents() if i.agent_id == slow_id] == ["running"]
                    assert agent.cancel_subagent(slow_id)
        assert not agent.cancel_subagent("agent-nobody")
    results = {e.tool_call_id: e.content for e in of(ToolOutput, events) if e.tool_name == "task"}
    assert "user stopped the subagent" in results["task-slow"].lower()
    assert results["task-quick"] == "quick answer"
    statuses = {e.subagent_id: e.status for e in of(SubagentFinished, events)}
    assert statuses[slow_id] == "cancelled" and sorted(statuses.values()) == ["cancelled", "done"]
    assert [r.content for r in of(Response, events) if r.agent_id == agent.agent_id and r.final] == ["parent done"]


async def test_resume_continues_a_finished_child_with_its_conversation(workdir: Path) -> None:
    parent = Script([task("r")], ["first"], [], ["second"])
    child = Script(["I counted 3."], ["Then 4."])
    model = Router({"PARENT": parent, "CHILD-r:": child}).model
    async with Agent(config(model, workdir)) as agent:
        events = await drive(agent.stream("PARENT one"))
        (started,) = of(SubagentStarted, events)
        child_id = started.subagent_id
        parent.steps[2] = [Call("task", {"prompt": "Count one more.", "resume": child_id}, id="again")]
        events = await drive(agent.stream("PARENT two"))
    assert [e.subagent_id for e in of(SubagentStarted, events)] == [child_id]
    assert parent.tool_results(3)["again"] == "Then 4."
    sent = prompts(child.requests[1])
    assert sent[0] == "CHILD-r: job" and "kernel is new" in sent[1] and sent[2] == "Count one more."


async def test_fork_starts_from_a_copy_of_the_parents_conversation(workdir: Path) -> None:
    seen: dict[str, list[ModelMessage]] = {}

    async def model_fn(messages: list[ModelMessage], info: Any) -> AsyncIterator[Any]:
        from pydantic_ai.models.function import DeltaToolCall

        texts = prompts(messages)
        if "FORK-JOB" in texts[-1]:
            seen["fork"] = list(messages)
            yield "fork result"
        elif texts[-1] == "PARENT go" and len(messages) == 1:
            yield {0: DeltaToolCall(name="execute_ipython_cell", json_args='{"code": "x = 1"}', tool_call_id="c")}
        elif len(messages) == 3:
            yield {0: DeltaToolCall(name="task", json_args='{"prompt": "FORK-JOB", "fork": true}', tool_call_id="f")}
        else:
            yield "parent done"

    from pydantic_ai.models.function import FunctionModel

    async with Agent(config(FunctionModel(stream_function=model_fn), workdir)) as agent:
        events = await drive(agent.stream("PARENT go"))
    assert [e.content for e in of(ToolOutput, events) if e.tool_call_id == "f"] == ["fork result"]
    forked = seen["fork"]
    texts = prompts(forked)
    assert texts[0] == "PARENT go" and "fork of" in texts[-2] and texts[-1] == "FORK-JOB"
    assert len(forked) == 3  # the parent's first request, its cell call and that call's result (with the job)


async def test_budgets_stop_children_and_say_which(workdir: Path) -> None:
    cell = Call("execute_ipython_cell", {"code": "1"})
    parent = Script([task("calls", max_tool_calls=2), task("tokens", max_tokens=60)], ["done"])
    calls = Script([cell], [cell], [cell], ["never"])
    tokens = Script([cell], [cell], ["never"])
    model = Router({"PARENT": parent, "CHILD-calls:": calls, "CHILD-tokens:": tokens}).model
    async with Agent(config(model, workdir)) as agent:
        events = await drive(agent.stream("PARENT go"))
    results = {e.tool_call_id: e for e in of(ToolOutput, events) if e.tool_name == "task"}
    assert "budget of 2 tool calls" in results["task-calls"].content and results["task-calls"].is_error
    assert "budget of 60 tokens" in results["task-tokens"].content
    assert calls.calls == 2 and tokens.calls < 3
    assert all(e.status == "turn_limit" for e in of(SubagentFinished, events))


async def test_depth_two_with_the_bound_held_across_the_tree(workdir: Path) -> None:
    parent = Script([task("mid1"), task("mid2")], ["parent done"])
    mids = {
        f"CHILD-mid{i}:": Script(
            [Call("task", {"prompt": f"CHILD-leaf{i}{j}: job"}, id=f"leaf-{i}{j}") for j in (1, 2)], ["mid done"]
        )
        for i in (1, 2)
    }
    leaf_cell = Call("execute_ipython_cell", {"code": "import time; time.sleep(0.5)"})
    leaves = {f"CHILD-leaf{i}{j}:": Script([leaf_cell], ["leaf done"]) for i in (1, 2) for j in (1, 2)}
    model = Router({"PARENT": parent, **mids, **leaves}).model
    peak = 0

    async def count() -> None:
        # a kernel counts if two polls 20 ms apart both see it: one that was just killed is still listed
        # for a moment before it exits, while the next child's kernel already starts
        nonlocal peak
        previous: set[int] = set()
        while True:
            now = set(await asyncio.to_thread(kernel_processes))
            peak = max(peak, len(now & previous))
            previous = now
            await asyncio.sleep(0.02)

    async with Agent(config(model, workdir, max_depth=2, max_subagents=4)) as agent:
        counter = asyncio.create_task(count())
        events = await drive(agent.stream("PARENT go"))
        counter.cancel()
    started = of(SubagentStarted, events)
    alive = most = 0
    for event in events:  # children alive at once, as the events show them
        alive += isinstance(event, SubagentStarted) - isinstance(event, SubagentFinished)
        most = max(most, alive)
    assert most == 4, "two children and two grandchildren at once: the bound counts the whole tree"
    by_parent: dict[str, int] = {}
    for event in started:
        by_parent[event.agent_id] = by_parent.get(event.agent_id, 0) + 1
    assert len(started) == 6 and sorted(by_parent.values()) == [2, 2, 2]
    assert all(e.status == "done" for e in of(SubagentFinished, events))
    assert peak <= 1 + 4, f"the main kernel plus at most max_subagents child kernels, saw {peak}"
    assert "task" not in [t.name for t in leaves["CHILD-leaf11:"].infos[0].function_tools]
    assert "task" in [t.name for t in mids["CHILD-mid1:"].infos[0].function_tools]


async def test_stop_ends_background_children_and_leaves_no_process(workdir: Path) -> None:
    parent = Script([task("bg", run_in_background=True)], ["started"])
    child = Script([Call("execute_ipython_cell", {"code": "import time; time.sleep(60)"})], ["never"])
    model = Router({"PARENT": parent, "CHILD-bg:": child}).model
    agent = Agent(config(model, workdir))
    await agent.start()
    await drive(agent.stream("PARENT go"))
    async with asyncio.timeout(LIMIT):
        while not agent.subagents() or agent.subagents()[0].state != "running":  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    await agent.stop()
    assert agent.subagents() == []
    assert kernel_processes() == []


async def test_task_list_lists_every_child_foreground_and_background_running_and_ended(workdir: Path) -> None:
    release = asyncio.Event()
    parent = Script(
        [task("fg", description="the quick one")],
        [task("bg", run_in_background=True, description="the slow one")],
        [Call("task_list", {}, id="list")],
        ["listed"],
    )
    fg = Script([Call("execute_ipython_cell", {"code": "1"}, id="fg-cell")], ["fg answer"])
    bg = Script([Block(release), "never told"])
    model = Router({"PARENT": parent, "CHILD-fg:": fg, "CHILD-bg:": bg}).model
    async with Agent(config(model, workdir)) as agent:
        events = await drive(agent.stream("PARENT go"))
        release.set()
    started = {e.prompt: e.subagent_id for e in of(SubagentStarted, events)}
    fg_id, bg_id = started["CHILD-fg: job"], started["CHILD-bg: job"]
    lines = parent.tool_results(3)["list"].splitlines()
    assert len(lines) == 2
    fg_line, bg_line = lines  # oldest first
    assert fg_line.startswith(f"{fg_id} type=general foreground state=done turns=2 elapsed=")
    assert "tokens=" in fg_line and "description='the quick one'" in fg_line
    assert re.match(rf"{bg_id} type=general background state=(waiting|starting|running) turns=\d+ elapsed=", bg_line)
    assert "description='the slow one'" in bg_line


async def test_depth_two_with_one_slot_finishes_the_grandchild_call_is_a_readable_result(workdir: Path) -> None:
    parent = Script([task("mid")], ["parent done"])
    mid = Script([Call("task", {"prompt": "CHILD-leaf: job"}, id="leaf")], ["mid did it itself"])
    leaf = Script(["never asked"])
    model = Router({"PARENT": parent, "CHILD-mid:": mid, "CHILD-leaf:": leaf}).model
    async with Agent(config(model, workdir, max_depth=2, max_subagents=1)) as agent:
        async with asyncio.timeout(LIMIT):
            events = await drive(agent.stream("PARENT go"))
    refused = mid.tool_results(1)["leaf"]
    assert refused.startswith("No subagent started: all 1 subagent slot (max_subagents=1) are held")
    assert leaf.calls == 0
    assert [e.subagent_id for e in of(SubagentStarted, events)] == [e.subagent_id for e in of(SubagentFinished, events)]
    assert len(of(SubagentStarted, events)) == 1  # the grandchild never started: no kernel beyond the bound
    assert parent.tool_results(1)["task-mid"] == "mid did it itself"
    assert [r.content for r in of(Response, events) if r.agent_id == agent.agent_id and r.final] == ["parent done"]


async def test_two_slots_two_parallel_children_that_each_nest_one_waits_the_last_caller_is_told(workdir: Path) -> None:
    release = asyncio.Event()
    parent = Script([task("mid1"), task("mid2")], ["parent done"])
    # mid1 asks first (its leaf waits for a slot); mid2 asks once mid1's leaf waits: no slot could ever free
    mid1 = Script([Call("task", {"prompt": "CHILD-leaf1: job"}, id="leaf1")], ["mid1 done"])
    mid2 = Script([Block(release), Call("task", {"prompt": "CHILD-leaf2: job"}, id="leaf2")], ["mid2 alone"])
    leaf1 = Script(["leaf1 done"])
    model = Router({"PARENT": parent, "CHILD-mid1:": mid1, "CHILD-mid2:": mid2, "CHILD-leaf1:": leaf1}).model
    async with Agent(config(model, workdir, max_depth=2, max_subagents=2)) as agent:
        async with asyncio.timeout(LIMIT):
            turn = asyncio.create_task(drive(agent.stream("PARENT go")))
            while not any(i.prompt == "CHILD-leaf1: job" and i.state == "waiting" for i in agent.subagents()):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
            release.set()
            events = await turn
    assert mid2.tool_results(1)["leaf2"].startswith("No subagent started: all 2 subagent slots")
    assert mid1.tool_results(1)["leaf1"] == "leaf1 done"  # it got mid2's slot once mid2 ended
    assert sorted(e.status for e in of(SubagentFinished, events)) == ["done", "done", "done"]


async def test_budget_and_turn_limit_results_say_their_reason_once(workdir: Path) -> None:
    cell = Call("execute_ipython_cell", {"code": "1"})
    parent = Script([task("calls", max_tool_calls=2), task("turns", max_turns=1)], ["done"])
    calls = Script([cell], [cell], [cell], ["never"])
    turns = Script([cell], ["never"])
    model = Router({"PARENT": parent, "CHILD-calls:": calls, "CHILD-turns:": turns}).model
    async with Agent(config(model, workdir)) as agent:
        events = await drive(agent.stream("PARENT go"))
    results = {e.tool_call_id: e.content for e in of(ToolOutput, events) if e.tool_name == "task"}
    assert results["task-calls"].count("budget of 2 tool calls") == 1, results["task-calls"]
    assert results["task-turns"].count("limit of 1 turn") == 1, results["task-turns"]
    assert "[Stopped:" not in results["task-calls"] + results["task-turns"]


async def test_task_stop_says_the_end_once_and_no_note_follows(workdir: Path) -> None:
    def stop_it(messages: list[ModelMessage]) -> list[Call]:
        started = tool_results(messages)["task-bg"]
        child_id = re.search(r"agent-[0-9a-f]+", started).group(0)  # type: ignore[union-attr]
        return [Call("task_stop", {"agent_id": child_id}, id="stop")]

    parent = Script([task("bg", run_in_background=True)], stop_it, ["stopped it"], ["next turn"])
    child = Script([Call("execute_ipython_cell", {"code": "import time; time.sleep(60)"}, id="slow")], ["never"])
    model = Router({"PARENT": parent, "CHILD-bg:": child}).model
    async with Agent(config(model, workdir)) as agent:
        events = await drive(agent.stream("PARENT go"))
        (stopped,) = [e for e in of(ToolOutput, events) if e.tool_call_id == "stop"]
        assert "you will not be told about it again" in stopped.content
        async with asyncio.timeout(LIMIT):
            while agent.subagents():  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        await drive(agent.stream("PARENT again"))
    assert [n for request in notes_in(parent) for n in request] == []


async def test_a_background_childs_end_is_queued_before_it_leaves_the_list(workdir: Path) -> None:
    # the consumer starts the next turn the moment the child is gone from subagents(): the note is there
    for round_ in range(4):
        parent = Script([task("bg", run_in_background=True)], ["started"], ["told?"])
        child = Script([f"answer {round_}"])
        model = Router({"PARENT": parent, "CHILD-bg:": child}).model
        async with Agent(config(model, workdir)) as agent:
            await drive(agent.stream("PARENT go"))
            async with asyncio.timeout(LIMIT):
                while agent.subagents():  # noqa: ASYNC110
                    await asyncio.sleep(0)
            await drive(agent.stream("PARENT next"))
        assert [len(n) for n in notes_in(parent)] == [0, 0, 1], f"round {round_}: {notes_in(parent)}"


async def test_task_calls_that_cannot_work_are_answered_at_once_and_nobody_is_asked(workdir: Path) -> None:
    impossible = [
        Call("task", {"prompt": "  "}, id="empty"),
        Call("task", {"prompt": "CHILD-x: job", "subagent_type": "nosuch"}, id="type"),
        Call("task", {"prompt": "CHILD-x: job", "resume": "agent-0000"}, id="resume"),
        Call("task", {"prompt": "CHILD-x: job", "resume": "agent-0000", "fork": True}, id="both"),
        Call("task_output", {"agent_id": "agent-0000"}, id="output"),
        Call("task_stop", {"agent_id": "agent-0000"}, id="stop"),
    ]
    parent = Script(impossible, ["done"])
    model = Router({"PARENT": parent}).model
    async with Agent(config(model, workdir, auto_approve=False)) as agent:
        events = await drive(agent.stream("PARENT go"), decide=False)
    assert of(ApprovalRequest, events) == [], "nobody is asked about a call that cannot work"
    assert of(SubagentStarted, events) == []
    results = parent.tool_results(1)
    assert "`prompt` is empty" in results["empty"]
    assert "Unknown subagent_type 'nosuch'" in results["type"] and "`general`" in results["type"]
    assert "Cannot resume 'agent-0000'" in results["resume"]
    assert "either `resume` or `fork`" in results["both"]
    assert "no subagent 'agent-0000'" in results["output"] and "no subagent 'agent-0000'" in results["stop"]
    assert all(e.is_error for e in of(ToolOutput, events))


async def test_a_cost_budget_on_a_model_without_a_known_price_is_refused_with_a_reason(workdir: Path) -> None:
    parent = Script([task("cheap", max_cost=0.01)], ["done"])
    model = Router({"PARENT": parent}).model
    async with Agent(config(model, workdir)) as agent:
        events = await drive(agent.stream("PARENT go"))
    assert of(SubagentStarted, events) == []
    refused = parent.tool_results(1)["task-cheap"]
    assert "`max_cost`" in refused and "price of the model" in refused and "max_tokens" in refused


async def test_a_subagent_with_a_question_open_is_listed_as_waiting_for_approval(workdir: Path) -> None:
    parent = Script([task("bg", run_in_background=True)], ["started"])
    child = Script([Call("execute_ipython_cell", {"code": "print(1)"}, id="ask")], ["done"])
    model = Router({"PARENT": parent, "CHILD-bg:": child}).model
    async with Agent(config(model, workdir, auto_approve=False)) as agent:
        await drive(agent.stream("PARENT go"))
        events = agent.background_events()
        async with asyncio.timeout(LIMIT):
            while not isinstance(event := await anext(events), ApprovalRequest) or event.decided:
                pass
        (info,) = agent.subagents()
        assert info.state == "waiting for approval" and info.background
        event.approve(True)
        async with asyncio.timeout(LIMIT):
            while agent.subagents() and agent.subagents()[0].state == "waiting for approval":  # noqa: ASYNC110
                await asyncio.sleep(0.01)


async def test_a_background_child_stopped_while_it_waits_for_a_slot_is_told_to_its_parent(workdir: Path) -> None:
    release = asyncio.Event()
    parent = Script([task("first", run_in_background=True), task("queued", run_in_background=True)], ["started"],
                    ["told?"])
    first = Script([Block(release), "first done"])
    model = Router({"PARENT": parent, "CHILD-first:": first, "CHILD-queued:": Script(["never"])}).model
    async with Agent(config(model, workdir, max_subagents=1)) as agent:
        await drive(agent.stream("PARENT go"))
        (queued,) = [i for i in agent.subagents() if i.prompt.startswith("CHILD-queued")]
        assert queued.state == "waiting"
        assert agent.cancel_subagent(queued.agent_id)
        async with asyncio.timeout(LIMIT):
            while any(i.agent_id == queued.agent_id for i in agent.subagents()):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        await drive(agent.stream("PARENT next"))
        release.set()
    (note,) = notes_in(parent)[2]
    assert queued.agent_id in note and "(cancelled)" in note and "The user stopped" in note
