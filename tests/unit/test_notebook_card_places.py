"""A question waiting for a click never moves (issue 40, item 34): answering the card above it and the subagent that
answer starts leave it where the pointer is. Real ipywidgets; the position is the card's index in the run's widget
tree in reading order, which is what the page lays out top to bottom."""

from __future__ import annotations

import ipywidgets as widgets

from freeact_sub import ApprovalPolicy, ApprovalRequest, SubagentStarted
from freeact_sub.notebook._order import document_order
from freeact_sub.notebook.call_view import CallView
from freeact_sub.notebook.run_panel import RunPanel


def task(call_id: str, job: str) -> ApprovalRequest:
    return ApprovalRequest(
        agent_id="agent-1", tool_name="task", tool_args={"prompt": job, "description": job}, tool_call_id=call_id
    )


def started(child: str, call_id: str) -> SubagentStarted:
    return SubagentStarted(agent_id="agent-1", subagent_id=child, tool_call_id=call_id, prompt="job", max_turns=5)


def place(run: RunPanel, widget: widgets.Widget) -> int:
    return list(document_order(run)).index(widget)


def call(run: RunPanel, agent_id: str, call_id: str) -> CallView:
    return run.panels[agent_id].calls[call_id]


async def test_a_waiting_card_stays_put_while_the_one_above_is_answered_and_its_subagent_appears() -> None:
    run = RunPanel("agent-1", "two jobs", policy=ApprovalPolicy(), on_stop=lambda: None)
    run.handle(task("t1", "count words"))
    run.handle(task("t2", "count lines"))
    first, second = call(run, "agent-1", "t1"), call(run, "agent-1", "t2")
    assert second.approval is not None
    button = second.approval.approve_button
    before = place(run, button)

    assert first.approval is not None
    first.approval.approve_button.click()
    assert place(run, button) == before  # the answered card keeps its (now inert) buttons' room
    assert first.approval is None and first.keeps_place

    run.handle(started("agent-2", "t1"))
    run.handle(
        ApprovalRequest(
            agent_id="agent-2", tool_name="execute_ipython_cell", tool_args={"code": "1"}, tool_call_id="c1"
        )
    )
    assert place(run, button) == before  # the child's panel (and its question) went below the waiting card
    child = run.panels["agent-2"]
    assert place(run, child) > place(run, second)
    assert "did not move" in run.static_text()

    child_approval = call(run, "agent-2", "c1").approval
    assert child_approval is not None
    child_button = child_approval.approve_button
    child_place = place(run, child_button)
    button.click()  # the second start: its child must not land above the first child's waiting question
    run.handle(started("agent-3", "t2"))
    assert place(run, child_button) == child_place

    child_button.click()  # nothing waits any more: the answered buttons go
    assert not any(view.keeps_place for panel in run.panels.values() for view in panel.calls.values())
    assert first.approval is None and all(
        not isinstance(w, widgets.Button) or w.disabled is False for w in document_order(first)
    )


async def test_with_nothing_waiting_below_a_subagent_nests_under_its_task_call() -> None:
    run = RunPanel("agent-1", "one job", policy=ApprovalPolicy(), on_stop=lambda: None)
    run.handle(task("t1", "count words"))
    first = call(run, "agent-1", "t1")
    assert first.approval is not None
    first.approval.approve_button.click()
    assert not first.keeps_place
    run.handle(started("agent-2", "t1"))
    assert run.panels["agent-2"] in document_order(first)


async def test_the_reason_box_is_several_lines_as_wide_as_the_card() -> None:
    run = RunPanel("agent-1", "code", policy=ApprovalPolicy(), on_stop=lambda: None)
    run.handle(
        ApprovalRequest(
            agent_id="agent-1", tool_name="execute_ipython_cell", tool_args={"code": "1"}, tool_call_id="c1"
        )
    )
    approval = call(run, "agent-1", "c1").approval
    assert approval is not None
    assert isinstance(approval.reason, widgets.Textarea) and approval.reason.rows >= 2
    assert approval.reason.layout.width == "100%"


async def test_a_cell_the_agent_ran_has_a_copy_button_with_its_code_escaped() -> None:
    run = RunPanel("agent-1", "code", policy=ApprovalPolicy(), on_stop=lambda: None)
    code = 'print("<b>a & b</b>")'
    run.handle(
        ApprovalRequest(
            agent_id="agent-1", tool_name="execute_ipython_cell", tool_args={"code": code}, tool_call_id="c1"
        )
    )
    view = call(run, "agent-1", "c1")
    (button,) = [w for w in document_order(view) if "freeact-copy" in getattr(w, "_dom_classes", ())]
    assert isinstance(button, widgets.HTML)
    assert 'data-code="print(&quot;&lt;b&gt;a &amp; b&lt;/b&gt;&quot;)"' in button.value  # never markup of its own
    assert "navigator.clipboard.writeText" in button.value
    assert "Copy" not in run.static_text()  # a control: not in the saved transcript
