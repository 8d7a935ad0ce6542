"""Subagents started from a cell's code (`from freeact_sub_tasks import task, map_tasks`).

One agent (a real kernel) for the module; its model and its children's are scripted: the parent's by a
`Script`, each child's by the row number in its prompt (row 7 first answers malformed JSON, row 13's model
breaks, rows named "Block" never answer). The children's type runs no code, so they need no kernels.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from freeact_sub import (
    Agent,
    AgentConfig,
    ApprovalRequest,
    CodeExecutionOutput,
    RunCancelled,
    SubagentFinished,
    SubagentStarted,
    ToolOutput,
)
from freeact_sub.config.definitions import AgentType
from freeact_sub.sessions import open_session
from tests.processes import kernel_processes
from tests.scripting import Call, Script, drive, first_prompt, of, until

pytestmark = pytest.mark.asyncio(loop_scope="module")

PARENT = "MAIN JOB"


class Children:
    """The children's model: answers by row number, counts how many answer at the same time."""

    def __init__(self, parent: Script) -> None:
        self.parent = parent
        self.running = self.most = 0
        self.model = FunctionModel(stream_function=self._stream, model_name="scripted")

    def _stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        prompt = first_prompt(messages)
        if PARENT in prompt:
            return self.parent._stream(messages, info)
        return self._answer(prompt, _last_prompt(messages))

    async def _answer(self, prompt: str, last: str) -> AsyncIterator[Any]:
        row = int(re.search(r"row (\d+)", prompt).group(1))  # type: ignore[union-attr]
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(0.05)
            if "Block" in prompt:
                await asyncio.Event().wait()
            if row == 13:
                raise RuntimeError("the model of row 13 broke")
            if row == 7 and "does not fit" not in last:
                yield '{"row": 7, "label": '  # malformed: corrected when asked
                return
            yield json.dumps({"row": row, "label": "even" if row % 2 == 0 else "odd"})
        finally:
            self.running -= 1


def _last_prompt(messages: list[ModelMessage]) -> str:
    """The user's text in the last request (a resumed child's note and prompt together)."""
    last = messages[-1] if messages and isinstance(messages[-1], ModelRequest) else None
    parts = last.parts if last is not None else []
    return "\n".join(p.content for p in parts if isinstance(p, UserPromptPart) and isinstance(p.content, str))


def cell(code: str, call_id: str = "cell") -> Call:
    return Call("execute_ipython_cell", {"code": code}, id=call_id)


def output(events: list, call_id: str = "cell") -> str:
    return next(e.content for e in of(CodeExecutionOutput, events) if e.tool_call_id == call_id)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory):
    script = Script()
    children = Children(script)
    config = AgentConfig(
        model=children.model, working_dir=tmp_path_factory.mktemp("tasks-from-code"), kernel_pool_size=0,
        mcp_pool_size=0, max_subagents=5,
        agents={"labeler": AgentType(description="Labels one row.", tools=[])},
    )
    async with Agent(config) as agent:
        yield agent, script, children


MAP = """
from pydantic import BaseModel
from freeact_sub_tasks import map_tasks, TaskError

class Label(BaseModel):
    row: int
    label: str

rows = [{"n": i} for i in range(30)]
out = await map_tasks("Label row {n}", rows, agent_type="labeler", output=Label)
print(sum(isinstance(o, Label) for o in out), [i for i, o in enumerate(out) if isinstance(o, TaskError)])
print(all(o.row == i and o.label == ("even" if i % 2 == 0 else "odd") for i, o in enumerate(out) if i != 13))
print(type(out[13]).__name__, out[13])
"""


async def test_a_cell_maps_30_rows_through_children_and_gets_objects_and_one_error(shared) -> None:
    agent, script, children = shared
    script.reset([cell(MAP)], ["done"])
    asked: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    events = await drive(agent.stream(f"{PARENT}: label the rows"), decide, limit=120)
    lines = output(events).strip().splitlines()
    assert lines[0] == "29 [13]" and lines[1] == "True", output(events)
    assert lines[2].startswith("TaskFailed ") and "the model of row 13 broke" in lines[2]
    assert children.most == 5, "at most max_subagents children answer at once (and the bound was used)"
    # one question for the batch, naming the template and the count; each child's request then approved at once
    code = [r for r in of(ApprovalRequest, events) if r.source == "code"]
    batch = [r for r in code if "count" in r.tool_args]
    assert [(r.tool_name, r.tool_args["prompt"], r.tool_args["count"], r.tool_args["example"]) for r in batch] == [
        ("task", "Label row {n}", 30, "Label row 0")]
    assert [r for r in asked if r.source == "code"] == batch, "a person was asked once, for the batch"
    each = [r for r in code if "count" not in r.tool_args]
    assert len(each) == 30 and all(r.auto_approved and r.cell_call_id == "cell" for r in each)
    assert each[0].tool_args["subagent_type"] == "labeler" and each[0].tool_args["prompt"] == "Label row 0"
    # the children are the agent's children, started from its cell; row 7 was resumed once to correct itself
    started = of(SubagentStarted, events)
    assert len(started) == 31 and {e.agent_id for e in started} == {agent.agent_id}
    assert all(e.tool_call_id.startswith(f"{batch[0].tool_call_id}/row-") for e in started)  # its rows, by id
    fixed = [e for e in started if e.tool_call_id.endswith("-fix")]
    assert len(fixed) == 1 and "does not fit" in fixed[0].prompt
    statuses = sorted(e.status for e in of(SubagentFinished, events))
    assert statuses == ["done"] * 30 + ["failed"]
    assert agent.tree.usage.of(started[0].subagent_id) is not None
    outputs = [e for e in of(ToolOutput, events) if e.source == "code"]  # each child's result, in its cell
    assert all(o.cell_call_id == "cell" and o.agent_id == agent.agent_id for o in outputs)
    assert sorted(o.is_error for o in outputs[:-1]) == [False] * 29 + [True]
    assert outputs[-1].tool_call_id == batch[0].tool_call_id  # then the batch's end
    assert outputs[-1].content == "29 of 30 subagents answered; 1 failed or were not approved"
    # the saved session tells the children inside the cell, each after its decision, as the live view did
    saved = open_session(agent.session_id, agent.config.working_dir)
    assert len(saved.children(agent.agent_id)) == 30
    replayed = saved.events()
    kinds = [(type(e).__name__, getattr(e, "tool_call_id", "")) for e in replayed]
    first = each[0].tool_call_id
    at = kinds.index(("SavedDecision", first))
    assert kinds[at + 1] == ("SubagentStarted", first) and ("SubagentFinished", first) in kinds[at + 2:]
    assert len(of(SubagentStarted, replayed)) == 30
    # the parent's model reads the cell's three lines, not thirty answers
    assert script.tool_results(1)["cell"].strip().splitlines()[0] == "29 [13]"
    assert kernel_processes() == [agent.kernel.pid], "the children ran no kernels, and none is left"


CHECKS = """
from freeact_sub_tasks import map_tasks, task_sync, TaskError
from mcptools import _runtime
one = task_sync("Label row 4", agent_type="labeler", output={"type": "object", "required": ["row"]})
print("sync", one)
two = await map_tasks("Label row {}", [1, 2], agent_type="labeler", approve="each")
print("each", [type(t).__name__ for t in two])
for bad in ({"kind": "map", "prompts": "x", "template": "t"}, {"kind": "task", "prompt": 7},
            {"kind": "map", "prompts": ["p"] * 1001, "template": "t"},
            {"kind": "task", "prompt": "p", "output": {"$ref": "https://example.com/s.json"}},
            {"kind": "task", "prompt": "p", "max_turns": True}):
    print("bad", _runtime.request(bad)["message"])
await map_tasks("Label row {}", [1, 2, 3], agent_type="labeler")
"""


async def test_approvals_one_by_one_rejected_batches_bad_requests_and_cancelling(shared) -> None:
    agent, script, _ = shared
    script.reset([cell(CHECKS)], ["done"])

    def decide(request: ApprovalRequest) -> bool:
        if request.source == "model":
            return True
        if "count" in request.tool_args:
            return False  # the batch of three
        return request.tool_args["prompt"] != "Label row 2"

    events = await drive(agent.stream(f"{PARENT}: checks"), decide, limit=60)
    text = output(events)
    assert "sync {'row': 4, 'label': 'even'}" in text
    assert "each ['str', 'TaskRejected']" in text, text
    assert "bad the items' prompts must be a list, not str" in text
    assert "bad the prompt must be a str, not int" in text
    assert "bad map_tasks got 1001 items; at most 1000" in text
    assert "bad the output schema may refer only inside itself" in text
    assert "bad max_turns must be an int from 1 to 1000, not True" in text
    assert "TaskRejected: the batch of 3 subagents was not approved; none of them ran" in text
    assert "_tasks.py" not in text and "_runtime.py" not in text and "asyncio" not in text, text  # the call site only
    code = [r for r in of(ApprovalRequest, events) if r.source == "code"]
    assert [r.tool_args["prompt"] for r in code] == ["Label row 4", "Label row 1", "Label row 2", "Label row {}"]

    # cancelling the turn cancels the children waiting and running
    block = "from freeact_sub_tasks import map_tasks\nawait map_tasks('Block row {}', range(8), agent_type='labeler')"
    script.reset([cell(block, "block")], ["never"])
    agent.approvals.always(agent.agent_id)
    seen: list[Any] = []
    try:
        turn = asyncio.ensure_future(drive(agent.stream(f"{PARENT}: block"), on_event=seen.append, limit=60))
        await until(lambda: len(of(SubagentStarted, seen)) == 5, "five children running")
        agent.cancel()
        events = await turn
    finally:
        agent.approvals.clear(agent.agent_id)
    assert isinstance(events[-1], RunCancelled)
    finished = of(SubagentFinished, events)
    assert len(finished) == 8 and {e.status for e in finished} == {"cancelled"}
    assert list(agent.tree.agents) == [agent.agent_id], "no child is left in the tree"
    assert kernel_processes() == [agent.kernel.pid]
