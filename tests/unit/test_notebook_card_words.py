"""A card that waits for a decision says "Always approve" once: its button; the panel's header holds the standing
decision as a checkbox named in a word (the card and the header read as two offers of the same thing before)."""

from __future__ import annotations

import ipywidgets as widgets

from freeact_sub import ApprovalPolicy, ApprovalRequest
from freeact_sub.notebook.agent_panel import AgentPanel


def words(widget: widgets.Widget) -> list[str]:
    found = [
        str(getattr(widget, name)) for name in ("description", "value") if isinstance(getattr(widget, name, None), str)
    ]
    for child in getattr(widget, "children", ()):
        found += words(child)
    return found


async def test_always_approve_appears_once_on_a_waiting_card_and_its_panel() -> None:
    panel = AgentPanel("agent-1234", policy=ApprovalPolicy())
    panel.handle(
        ApprovalRequest(
            agent_id="agent-1234", tool_name="execute_ipython_cell", tool_args={"code": "print(1)"}, tool_call_id="c1"
        )
    )
    shown = words(panel)
    assert sum("Always approve" in text for text in shown) == 1, shown
    assert panel.always_checkbox.description == "auto-approve"
    assert "agent-1234" in panel.always_checkbox.tooltip
