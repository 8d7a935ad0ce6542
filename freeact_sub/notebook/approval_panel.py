"""`ApprovalPanel`: the buttons that answer one pending `ApprovalRequest`."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets

from freeact_sub import ApprovalRequest

from . import _html

__all__ = ["ApprovalPanel"]


class ApprovalPanel(widgets.HBox):
    """**Approve**, **Reject** and **Always approve <agent_id>** for one request.

    The panel only reports what was clicked; the `CallView` that holds it decides the request
    and takes the panel away. Every button carries the CSS classes `freeact-approve` /
    `freeact-reject` / `freeact-always` and `freeact-by-<agent_id>`, so tests and people's
    scripts can find the buttons of one agent.
    """

    def __init__(
        self,
        request: ApprovalRequest,
        *,
        on_decision: Callable[[bool], None],
        on_always: Callable[[], None],
    ) -> None:
        self.request = request
        what = "this code" if request.code is not None else f"<code>{_html.escape(request.tool_name)}</code>"
        question = widgets.HTML(f"<b>{_html.escape(request.agent_id)}</b> asks to run {what}:")
        self.approve_button = widgets.Button(description="Approve", button_style="success", icon="check")
        self.reject_button = widgets.Button(description="Reject", button_style="danger", icon="times")
        self.always_button = widgets.Button(
            description=f"Always approve {request.agent_id}",
            tooltip=f"Approve this and every later action of {request.agent_id} without asking",
            layout=widgets.Layout(width="auto"),
        )
        for button, name in (
            (self.approve_button, "approve"),
            (self.reject_button, "reject"),
            (self.always_button, "always"),
        ):
            button.add_class(f"freeact-{name}")
            button.add_class(f"freeact-by-{request.agent_id}")
        self.approve_button.on_click(lambda _: on_decision(True))
        self.reject_button.on_click(lambda _: on_decision(False))
        self.always_button.on_click(lambda _: on_always())
        super().__init__([question, self.approve_button, self.reject_button, self.always_button])
        self.add_class("freeact-approval")

    def disable(self) -> None:
        """Make the buttons inert (the request was decided or the run ended)."""
        for button in (self.approve_button, self.reject_button, self.always_button):
            button.disabled = True
