"""`CallView`: one tool call of one agent — what it does, the decision on it, and its result."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Literal

import ipywidgets as widgets

from freeact_sub import ApprovalRequest, CodeExecutionOutput, ToolOutput
from freeact_sub.subagents.task_notes import batch_example, task_call_notes

from . import _html
from .approval_panel import ApprovalPanel
from .change_panel import ChangePanel

__all__ = ["CallView", "Decision"]

Decision = Literal[
    "waiting for approval",
    "approved",
    "auto-approved",
    "rejected",
    "cancelled",
    "refused",
    "interrupted",
    "timed out",
]
"""What became of a call: decided by a person or a standing decision, or stopped before its end.

`cancelled`: the run ended before anyone decided. `interrupted`: approved, then stopped (Stop,
or the run ended) before it finished. `timed out`: the cell ran past its time limit.
"""

_DECISION_CLASS = {
    "waiting for approval": "waiting",
    "approved": "approved",
    "auto-approved": "auto",
    "rejected": "rejected",
    "cancelled": "cancelled",
    "refused": "rejected",
    "interrupted": "interrupted",
    "timed out": "timed-out",
}


class CallView(widgets.VBox):
    """A tool call: the code (highlighted) or the tool and its arguments, then its output.

    While the call waits for a decision it holds an `ApprovalPanel`. A `task` call also holds
    the panel of the subagent it started.
    """

    def __init__(
        self,
        *,
        tool_name: str,
        tool_call_id: str,
        request: ApprovalRequest | None = None,
        on_change: Callable[[], None] = lambda: None,
        on_always: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__()
        self.add_class("freeact-call")
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self.request = request
        self._on_change = on_change
        self.finished = False
        """Whether the call's result (cell output or tool result) has arrived."""
        self.reason: str | None = None
        """The reason given with a rejection, if any."""
        self._output_text = ""
        self._title = widgets.HTML()
        source = (request.tool_args if request else {}).get("code")
        self._head: widgets.Widget = self._title
        if tool_name == "execute_ipython_cell" and isinstance(source, str):
            copy = widgets.HTML(_html.copy_button(source))
            copy.add_class("freeact-copy")  # a control: not in the static copy
            self._head = widgets.HBox([self._title, copy])
            self._head.add_class("freeact-call-head")
        self._body = widgets.HTML(_describe(tool_name, request.tool_args if request else {}))
        self._output = widgets.HTML()
        self._output.add_class("freeact-output-box")  # the box a long output scrolls in (it lives across updates)
        self._images = widgets.HBox()
        self._images.add_class("freeact-images")
        self._subagents = widgets.VBox()
        self._changes = ChangePanel(request.changes) if request is not None and request.changes else None
        self.approval: ApprovalPanel | None = None
        self._answered: ApprovalPanel | None = None
        """The buttons of a decided request, kept (inert) in place while questions wait below (see `keeps_place`)."""
        self.decision: Decision
        if request is None:
            self.decision = "refused"
        elif request.decided and request.decision is False:
            self.decision = "rejected"  # an approval rule refused it; nobody was asked
        elif request.auto_approved or request.decided:
            self.decision = "auto-approved"
        else:
            self.decision = "waiting for approval"
            self.approval = ApprovalPanel(request, on_decision=self.decide, on_always=on_always)
            self.add_class("freeact-pending")
        self._layout()

    @property
    def pending(self) -> bool:
        """Whether the call still waits for a person's decision."""
        return self.decision == "waiting for approval"

    @property
    def keeps_place(self) -> bool:
        """Whether the call still shows its answered (inert) buttons, so that nothing below it moves up."""
        return self._answered is not None

    def give_up_place(self) -> None:
        """Take the answered buttons away; the run calls it once no question waits below this call."""
        if self._answered is not None:
            self._answered = None
            self._layout()

    def decide(self, approved: bool, reason: str | None = None) -> None:
        """Answer the request (once); the agent that asked goes on.

        A rejection with a reason tells the model why, and its turn goes on.
        """
        if not self.pending or self.request is None:
            return
        reason = reason.strip() if reason and not approved else None
        self.request.approve(approved, reason)
        self.reason = reason or None
        self._settle("approved" if approved else "rejected")

    def cancel(self) -> None:
        """The run (or the agent) ended: undecided calls are cancelled, unfinished ones interrupted."""
        if self.pending:
            self._settle("cancelled")
        elif self.decision in ("approved", "auto-approved") and not self.finished:
            self.decision = "interrupted"
            self._layout()

    def add_output(self, text: str) -> None:
        """Show more output of a running cell."""
        self._output_text += text
        self._show_output(self._output_text, error=False)

    def set_output(self, event: CodeExecutionOutput) -> None:
        """Show the complete output of the cell, with its images."""
        self.finished = True
        text = event.content
        if event.status == "timeout":
            text += "\n[the cell timed out and was interrupted]"
            self.decision = "timed out"
        elif event.status == "kernel_died":
            text += "\n[the kernel died and was restarted]"
        elif event.status not in ("ok", "error"):  # e.g. stopped by the user
            self.decision = "interrupted"
        self._output_text = text
        self._show_output(text or "(no output)", error=event.status != "ok")
        images = []
        for path in event.images:
            try:
                images.append(widgets.Image(value=path.read_bytes(), format="png", layout={"max_width": "480px"}))
            except OSError:
                images.append(widgets.HTML(_html.preformatted(f"[image not readable: {path}]", "freeact-error")))
        self._images.children = tuple(images)
        self._layout()

    def set_result(self, event: ToolOutput) -> None:
        """Show the result of an MCP tool, of `reset_kernel`, or a subagent's final answer."""
        self.finished = True
        if event.is_error:
            self._output.value = _html.preformatted(event.content, "freeact-pre freeact-error")
        elif event.tool_name == "task":
            self._output.value = f"<b>Result:</b>{_html.markdown(event.content)}"
        else:
            self._output.value = _html.preformatted(event.content, "freeact-pre freeact-output")
        self._layout()

    def attach_subagent(self, panel: widgets.Widget) -> None:
        """Nest the panel of the subagent this `task` call started."""
        self._subagents.children = (*self._subagents.children, panel)
        self._layout()

    def _show_output(self, text: str, *, error: bool) -> None:
        css = "freeact-pre freeact-output" + (" freeact-error" if error else "")
        self._output.value = _html.preformatted(text, css)
        if self._output not in self.children:
            self._layout()

    def _settle(self, decision: Decision) -> None:
        self.decision = decision
        if self.approval is not None:
            self.approval.disable()
            # Kept, inert, until the run sees no question waiting below: taking it away at once would pull the
            # next waiting card up under the pointer of a person about to click it.
            self._answered, self.approval = self.approval, None
        self.remove_class("freeact-pending")
        self._layout()
        self._on_change()

    def _layout(self) -> None:
        css = _DECISION_CLASS[self.decision]
        reason = f' <span class="freeact-reason">{_html.escape(self.reason)}</span>' if self.reason else ""
        if self.request is not None and self.request.rule:
            reason += f' <span class="freeact-rule">by rule {_html.escape(self.request.rule)}</span>'
        elif self.request is not None and self.request.hook:
            did = "arguments rewritten by" if self.request.decision is None or (
                self.request.decision and not self.request.auto_approved) else "by"
            reason += f' <span class="freeact-rule freeact-hook">{did} hook {_html.escape(self.request.hook)}</span>'
            if self.request.decision is False and self.request.reason and not self.reason:
                reason += f' <span class="freeact-reason">{_html.escape(self.request.reason)}</span>'
        self._title.value = (
            f'<span class="freeact-call-title">{_html.escape(self.tool_name)}</span> '
            f'<span class="freeact-decision freeact-decision-{css}" data-decision="{self.decision}">'
            f"{self.decision}</span>{reason}"
        )
        parts: list[widgets.Widget] = [self._head, self._body]
        if self._changes is not None:
            parts.append(self._changes)
            if not self.pending:
                self._changes.disable()
        if self.approval is not None or self._answered is not None:
            parts.append(self.approval or self._answered)
        if self._subagents.children:
            parts.append(self._subagents)
        if self._output.value:
            parts.append(self._output)
        if self._images.children:
            parts.append(self._images)
        self.children = tuple(parts)  # traitlets sends an update only if the tuple changed


def _describe(tool_name: str, arguments: dict) -> str:
    if tool_name == "execute_ipython_cell" and isinstance(arguments.get("code"), str):
        return _html.code(arguments["code"])
    if tool_name == "task" and isinstance(arguments.get("prompt"), str):
        notes = task_call_notes(arguments)
        note = f' <span class="freeact-meta">({html.escape(" · ".join(notes))})</span>' if notes else ""
        job = "Job for each subagent of a batch" if "count" in arguments else "Job for a subagent"
        example = ""
        if (first := batch_example(arguments)) is not None:  # what one row will read, filled in
            head = html.escape(first[0].rstrip(": ").capitalize())
            example = f"<b>{head}, as its subagent reads it</b>{_html.preformatted(first[1])}"
        return f"<b>{job}</b>{note}{_html.preformatted(arguments['prompt'])}{example}"
    if tool_name == "apply_changes":
        return ""  # the change panel shows the files
    if tool_name == "reset_kernel":
        return '<span class="freeact-meta">restart the kernel: all variables are lost</span>'
    return _html.tool_arguments(arguments) if arguments else ""
