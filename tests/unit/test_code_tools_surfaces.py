"""Calls made from a cell's code in the terminal and the notebook: shown, attributed, and approvable."""

from __future__ import annotations

import io

from rich.console import Console

from freeact_sub import ApprovalPolicy, ApprovalRequest, ToolOutput
from freeact_sub.notebook.agent_panel import AgentPanel
from freeact_sub.terminal.approvals import ApprovalDesk
from freeact_sub.terminal.palette import Palette
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.status import SubagentBoard

AGENT = "agent-00c0"


def requests() -> tuple[ApprovalRequest, ApprovalRequest]:
    cell = ApprovalRequest(
        agent_id=AGENT, tool_name="execute_ipython_cell", tool_args={"code": "add(a=1, b=2)"}, tool_call_id="c1"
    )
    call = ApprovalRequest(
        agent_id=AGENT, tool_name="calc_add", tool_args={"a": 1, "b": 2}, tool_call_id="c1/code-1",
        source="code", cell_call_id="c1",
    )
    return cell, call


async def test_the_terminal_shows_a_call_from_code_with_its_origin_and_result() -> None:
    output = io.StringIO()
    palette = Palette()
    renderer = Renderer(Console(file=output, width=120), palette, SubagentBoard(palette), main_id=AGENT)
    _, call = requests()
    renderer.show_request(call)
    renderer.handle(ToolOutput(agent_id=AGENT, content="3", tool_name="calc_add", tool_call_id="c1/code-1",
                               source="code", cell_call_id="c1"))
    text = output.getvalue()
    assert "calc_add  from code in its cell" in text and '{"a": 1, "b": 2}' in text
    assert "calc_add → 3" in text


async def test_the_notebook_nests_a_call_from_code_in_its_cell_and_approves_it() -> None:
    panel = AgentPanel(AGENT, policy=ApprovalPolicy())
    cell, call = requests()
    panel.handle(cell)
    panel.calls["c1"].decide(True)
    panel.handle(call)
    view = panel.calls["c1/code-1"]
    assert view in panel.calls["c1"]._subagents.children  # inside the cell that made it
    assert view not in panel._body.children
    assert view.approval is not None
    view.approval.approve_button.click()
    assert call.decided and await call.approved()
    panel.handle(ToolOutput(agent_id=AGENT, content="3", tool_name="calc_add", tool_call_id="c1/code-1",
                            source="code", cell_call_id="c1"))
    assert "3" in view._output.value


def batch_request() -> ApprovalRequest:
    """The one question of a `map_tasks` batch from the cell `c1`."""
    return ApprovalRequest(
        agent_id=AGENT, tool_name="task", tool_call_id="c1/code-tasks-1", source="code", cell_call_id="c1",
        tool_args={"prompt": "Label row {n}", "subagent_type": "labeler", "count": 30},
    )


async def test_the_terminal_asks_for_a_batch_of_subagents_from_code_in_one_question() -> None:
    output = io.StringIO()
    palette = Palette()
    renderer = Renderer(Console(file=output, width=100), palette, SubagentBoard(palette), main_id=AGENT)
    desk = ApprovalDesk(renderer, palette, ApprovalPolicy())
    desk.submit(batch_request())  # shows the call, and asks at the bottom of the live view
    text = " ".join(output.getvalue().split())
    assert "task from code in its cell" in text and "Label row {n}" in text
    assert "a batch of 30 subagents, one per item: approving it starts them all · labeler" in text
    screen = Console(width=100, record=True, file=io.StringIO())
    screen.print(desk.view())
    assert f"[{AGENT}] Start these 30 subagents?" in screen.export_text()


async def test_the_notebook_asks_for_a_batch_inside_its_cell_and_nests_its_children_there() -> None:
    panel = AgentPanel(AGENT, policy=ApprovalPolicy())
    cell, _ = requests()
    panel.handle(cell)
    panel.calls["c1"].decide(True)
    batch = batch_request()
    panel.handle(batch)
    view = panel.calls["c1/code-tasks-1"]
    assert view in panel.calls["c1"]._subagents.children
    assert "Job for each subagent of a batch" in view._body.value and "a batch of 30 subagents" in view._body.value
    assert view.approval is not None
    view.approval.approve_button.click()
    assert await batch.approved()
    child = ApprovalRequest(agent_id=AGENT, tool_name="task", tool_args={"prompt": "Label row 2"}, source="code",
                            tool_call_id="c1/code-task-3", cell_call_id="c1", auto_approved=True)
    child.approve(True)
    panel.handle(child)
    own, fix = AgentPanel("agent-0001", policy=ApprovalPolicy()), AgentPanel("agent-0001", policy=ApprovalPolicy())
    panel.attach_subagent("c1/code-task-3", own)
    panel.attach_subagent("c1/code-task-3-fix", fix)  # asked to correct its answer: the same child, the same place
    assert panel.calls["c1/code-task-3"]._subagents.children == (own, fix)
    assert panel.calls["c1/code-task-3"] in panel.calls["c1"]._subagents.children
