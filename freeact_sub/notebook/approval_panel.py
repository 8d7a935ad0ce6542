"""`ApprovalPanel`: the buttons that answer one pending `ApprovalRequest`."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets

from freeact_sub import ApprovalRequest

from . import _html

__all__ = ["ApprovalPanel"]


class ApprovalPanel(widgets.HBox):
    """**Approve**, **Reject** and **Always approve <agent_id>** for one request, and below them a box as wide as
    the card for an optional reason (several lines).

    The panel only reports what was clicked; the `CallView` that holds it decides the request
    and takes the panel away. A reason typed beside Reject goes to the model as the call's
    result, and the agent's turn goes on; a rejection without one ends the turn. Every control
    carries the CSS classes `freeact-approve` / `freeact-reject` / `freeact-reason-input` /
    `freeact-always` and `freeact-by-<agent_id>`, so tests and people's scripts can find the
    controls of one agent.
    """

    def __init__(
        self,
        request: ApprovalRequest,
        *,
        on_decision: Callable[[bool, str | None], None],
        on_always: Callable[[], None],
    ) -> None:
        self.request = request
        what = "this code" if request.code is not None else f"<code>{_html.escape(request.tool_name)}</code>"
        question = widgets.HTML(f"<b>{_html.escape(request.agent_id)}</b> asks to run {what}:")
        self.approve_button = widgets.Button(description="Approve", button_style="success", icon="check")
        self.reject_button = widgets.Button(description="Reject", button_style="danger", icon="times")
        # a line of its own as wide as the card, several lines high: a reason is a sentence or two, not a word
        self.reason = widgets.Textarea(
            placeholder="reason for a rejection (optional): the call does not run, the model reads it and goes on",
            tooltip="Rejected with a reason, the call does not run, the model reads the reason and goes on",
            rows=2,
            layout=widgets.Layout(width="100%", flex="1 1 100%"),
        )
        self.always_button = widgets.Button(
            description=f"Always approve {request.agent_id}",
            tooltip=f"Approve this and every later action of {request.agent_id} without asking",
            layout=widgets.Layout(width="auto"),
        )
        self._controls: tuple[widgets.DOMWidget, ...] = (
            self.approve_button,
            self.reject_button,
            self.always_button,
            self.reason,
        )
        for control, name in zip(self._controls, ("approve", "reject", "always", "reason-input"), strict=True):
            control.add_class(f"freeact-{name}")
            control.add_class(f"freeact-by-{request.agent_id}")
        self.approve_button.on_click(lambda _: on_decision(True, None))
        self.reject_button.on_click(lambda _: on_decision(False, self.reason.value))
        self.always_button.on_click(lambda _: on_always())
        super().__init__([question, *self._controls])
        self.add_class("freeact-approval")

    def disable(self) -> None:
        """Make the buttons inert (the request was decided or the run ended)."""
        for control in self._controls:
            control.disabled = True
