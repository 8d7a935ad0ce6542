"""What hooks did, as the terminal and the notebook show it: a refusal, a rewrite, an allow, a failure."""

from __future__ import annotations

import io

from rich.console import Console

from freeact_sub import ApprovalPolicy, ApprovalRequest, HookFailed
from freeact_sub.notebook.agent_panel import AgentPanel
from freeact_sub.terminal.palette import Palette
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.status import SubagentBoard

AGENT = "agent-00c0"


def request(call_id: str, *, decision: bool | None, reason: str | None = None, auto: bool = False) -> ApprovalRequest:
    made = ApprovalRequest(agent_id=AGENT, tool_name="execute_ipython_cell", tool_args={"code": "print(1)"},
                           tool_call_id=call_id, hook="no_deletes", auto_approved=auto)
    if decision is not None:
        made.approve(decision, reason)
    return made


async def test_the_terminal_says_which_hook_refused_allowed_rewrote_or_failed() -> None:
    output = io.StringIO()
    palette = Palette()
    renderer = Renderer(Console(file=output, width=160), palette, SubagentBoard(palette), main_id=AGENT)
    renderer.handle(request("a", decision=False, reason="no deleting"))
    renderer.handle(request("b", decision=True, auto=True))
    renderer.handle(request("c", decision=None))
    renderer.handle(HookFailed(agent_id=AGENT, hook_event_name="PreToolUse", hook="check.sh", message="exited with 2"))
    text = output.getvalue()
    assert "execute_ipython_cell refused by hook no_deletes: no deleting" in text
    assert "auto-approved by hook no_deletes" in text
    assert "hook no_deletes rewrote the arguments of execute_ipython_cell" in text
    assert "hook check.sh failed at PreToolUse: exited with 2" in text


async def test_the_notebook_panel_says_which_hook_decided_and_shows_a_failure() -> None:
    panel = AgentPanel(AGENT, policy=ApprovalPolicy())
    panel.handle(request("a", decision=False, reason="no deleting"))
    panel.handle(HookFailed(agent_id=AGENT, hook_event_name="PostToolUse", hook="note.sh", message="timed out"))
    title = panel.calls["a"]._title.value
    assert "by hook no_deletes" in title and "no deleting" in title
    shown = " ".join(getattr(child, "value", "") for child in panel._body.children)
    assert "hook <code>note.sh</code> failed at PostToolUse: timed out" in shown
