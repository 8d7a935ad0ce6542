"""`AgentPanel`: everything one agent does in a run, under a header with its id and state."""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from typing import Literal

import ipywidgets as widgets

from freeact_sub import (
    AgentEvent,
    ApprovalPolicy,
    ApprovalRequest,
    CodeExecutionOutput,
    CodeExecutionOutputChunk,
    ContextCompacted,
    HookFailed,
    ModelRetry,
    ModelSlot,
    ModelUsage,
    Response,
    ResponseChunk,
    RunCancelled,
    SubagentMessage,
    SubagentReport,
    Thoughts,
    ThoughtsChunk,
    ToolOutput,
    TurnStarted,
)

from ..events.batches import batch_row
from . import _html
from .batch_card import BatchCard
from .call_view import CallView
from .message_box import message_box, message_widgets
from .panel_header import format_seconds, kind_html, sandbox_html, usage_html
from .streamed_text import StreamedText

__all__ = ["AgentPanel", "AgentState"]

AgentState = Literal[
    "waiting for a slot", "starting", "running", "done", "failed", "cancelled", "turn limit", "rejected"
]


class AgentPanel(widgets.VBox):
    """The panel of one agent (main agent or subagent).

    The header shows the agent's id, its state (running / waiting for approval / done / failed /
    cancelled), the time since it started and the turns it used, and a checkbox for the standing
    decision "always approve this agent". Below it, in order: streamed text (Markdown once
    complete), the main agent's thinking (a subagent's thinking is not shown), and one `CallView`
    per tool call, pending ones with their approval buttons.

    The checkbox follows the agent's `ApprovalPolicy` wherever it changes (another panel, or code).
    `on_change` is called whenever what the panel shows about pending calls may have changed.
    """

    def __init__(
        self,
        agent_id: str,
        *,
        policy: ApprovalPolicy,
        subagent: bool = False,
        max_turns: int | None = None,
        on_change: Callable[[], None] = lambda: None,
        on_stop: Callable[[str], None] | None = None,
        on_send: Callable[[str, str], str | None] | None = None,
    ) -> None:
        super().__init__()
        self.agent_id = agent_id
        self.subagent = subagent
        self.max_turns = max_turns
        self.state: AgentState = "starting" if not subagent else "running"
        self.waiting_for_trust = False
        """A main agent whose start waits for the person's answer to the trust question."""
        self.turns = 0
        self.tokens = 0
        """Input plus output tokens of this agent's model responses so far."""
        self.cost: Decimal | None = None
        """USD of those responses, where the price is known."""
        self.calls: dict[str, CallView] = {}
        """The tool calls of this agent, by tool call id."""
        self.batch_cards: dict[str, BatchCard] = {}
        """The cards of its `map_tasks` batches, by their question's call id: each row's call goes under its row."""
        self.error: str | None = None
        self.retries = 0
        """Model requests of this agent sent again after a failure before they acted."""
        self.model_note = ""
        """What its model request waits for now: `retrying in 4 s · attempt 2/6 · rate limited`, a model slot."""
        self._note_until: float | None = None
        self._policy = policy
        self._on_change = on_change
        self._started = time.monotonic()
        self._elapsed: float | None = None
        self.text = StreamedText(self._append)
        """Its streamed answer and thinking."""
        self._syncing = False
        self.agent_type = "general"
        """The agent type it runs as."""
        self.description = ""
        """The `task` call's short title for its job."""
        self.model = ""
        self.waited = 0.0
        """Seconds it waited for a slot before it started."""
        self.sandbox = ""
        """The sandbox profile's name; empty until known."""
        self.sandbox_note = ""
        """The model's name as sent."""

        self._header = widgets.HTML()
        self.always_checkbox = widgets.Checkbox(  # a state, in a word: a card's button says "Always approve …"
            description="auto-approve",
            tooltip=f"Standing decision: run every action of {agent_id} without asking (untick to be asked again)",
            indent=False,
            layout=widgets.Layout(width="auto"),
        )
        self.always_checkbox.add_class("freeact-always-checkbox")
        self.always_checkbox.add_class(f"freeact-by-{agent_id}")
        self.always_checkbox.observe(self._on_checkbox, names="value")
        self.fold_button = widgets.Button(icon="chevron-down", tooltip=f"Fold {agent_id}'s panel (or open it again)",
                                          layout=widgets.Layout(width="auto"))
        """Folds the panel to its header and opens it again; a new question for a person opens it."""
        self.fold_button.add_class("freeact-fold")
        self.fold_button.on_click(lambda _: self.fold(not self.folded))
        header_parts: list[widgets.Widget] = [self.fold_button, self._header, self.always_checkbox]
        self.stop_button: widgets.Button | None = None
        """A subagent's own Stop (it stops this agent only; its parent's turn goes on)."""
        if on_stop is not None:
            self.stop_button = widgets.Button(description="Stop", icon="stop", tooltip=f"Stop {agent_id} only",
                                              layout=widgets.Layout(width="auto"))
            self.stop_button.add_class("freeact-stop-agent")
            self.stop_button.on_click(lambda _: on_stop(agent_id))
            header_parts.append(self.stop_button)
        header = widgets.HBox(header_parts)
        header.add_class("freeact-panel-header")
        self._body = widgets.VBox()
        self.message_box: widgets.HBox | None = None
        """A subagent's message box: the person's message reaches it at its next step (`Agent.send`)."""
        parts: list[widgets.Widget] = [header, self._body]
        self.message_text, self.send_button, self.send_note = message_widgets(agent_id)
        if on_send is not None:
            self.message_box = message_box(agent_id, on_send, self.message_text, self.send_button, self.send_note)
            parts.append(self.message_box)
        self.children = tuple(parts)
        self.add_class("freeact-panel")
        self.add_class("freeact-subagent" if subagent else "freeact-main")
        self.add_class(f"freeact-panel-{agent_id}")
        policy.subscribe(self._policy_changed)
        self.refresh()

    # -- what the header shows ---------------------------------------------------------------

    @property
    def shown_state(self) -> str:
        """The state as a person reads it; a running agent with a pending request is waiting."""
        if self.state == "running" and any(call.pending for call in self.calls.values()):
            return "waiting for approval"
        if self.state == "starting" and self.waiting_for_trust:
            return "waiting for trust"
        return self.state

    @property
    def pending_count(self) -> int:
        """How many of this agent's calls wait for a person's decision."""
        return sum(call.pending for call in self.calls.values())

    @property
    def folded(self) -> bool:
        """Whether the panel shows its header only."""
        return self._body.layout.display == "none"

    def fold(self, folded: bool = True) -> None:
        """Show only the header (`folded`), or everything again."""
        for part in self.children[1:]:
            gone = part is self.message_box and self.finished  # an ended agent reads no more messages
            part.layout.display = "none" if folded or gone else None
        self.fold_button.icon = "chevron-right" if folded else "chevron-down"

    @property
    def finished(self) -> bool:
        return self.state not in ("waiting for a slot", "starting", "running")

    @property
    def elapsed(self) -> float:
        return self._elapsed if self._elapsed is not None else time.monotonic() - self._started

    def wait_for_slot(self) -> None:
        """The subagent waits for a slot (`max_subagents` run already); its clock starts when it starts."""
        self.state = "waiting for a slot"
        self.refresh()

    def start(self, max_turns: int) -> None:
        """A queued subagent got its slot: it runs from now on."""
        self.max_turns, self.state, self._started = max_turns, "running", time.monotonic()
        self.refresh()

    def set_waited(self, seconds: float) -> None:
        """Show how long it waited for a slot before it ran (said apart from its run time)."""
        self.waited = seconds
        self.refresh()

    def set_sandbox(self, profile: str, note: str = "") -> None:
        """Show the sandbox profile the agent's kernel runs under (with why, when it is `off` unasked)."""
        self.sandbox, self.sandbox_note = profile, note
        self.refresh()

    def set_kind(self, agent_type: str, description: str, model: str) -> None:
        """Show the agent's type, its job's title and its model in the header."""
        self.agent_type, self.description, self.model = agent_type, description, model
        self.refresh()

    def _model_note_html(self) -> str:
        """The header's note on a model request that waits: to be retried (counting down) or for a slot."""
        if not self.model_note or self.finished:
            return ""
        note = self.model_note
        if self._note_until is not None:
            left = self._note_until - time.time()
            if left <= 0:
                self.model_note, self._note_until = "", None
                return ""
            note = f"retrying in {max(1, round(left))} s · {note}"
        return f' <span class="freeact-model-note">{_html.escape(note)}</span>'

    def refresh(self) -> None:
        """Redraw the header (state, elapsed time, turns) and follow the standing decision."""
        shown = self.shown_state
        css = {"waiting for approval": "waiting", "waiting for trust": "waiting", "turn limit": "turn-limit",
               "starting": "running",
               "waiting for a slot": "queued"}.get(shown, shown)
        role = "subagent" if self.subagent else "main agent"
        turns = f"{self.turns}/{self.max_turns}" if self.max_turns else str(self.turns)
        error = f' <span class="freeact-error">{_html.escape(self.error)}</span>' if self.error else ""
        waited = f" (after {format_seconds(self.waited)} waiting for a slot)" if self.waited >= 0.1 else ""
        kind = kind_html(self.agent_type, self.description, self.model) if self.subagent else ""
        kind += sandbox_html(self.sandbox, self.sandbox_note)
        value = (
            f'<span class="freeact-id">{_html.escape(self.agent_id)}</span> '
            f'<span class="freeact-role">{role}</span> {kind}'
            f'<span class="freeact-state freeact-state-{css}" data-state="{shown}">{shown}</span>'
            f'{self._model_note_html()} '
            f'<span class="freeact-meta">{format_seconds(self.elapsed)}{waited} · '
            f'<span class="freeact-turns">turns used: {turns}</span>'
            f'{usage_html(self.tokens, self.cost, self.retries)}</span>{error}'
        )
        if self._header.value != value:
            self._header.value = value
        self._sync_checkbox()
        self._on_change()

    def _sync_checkbox(self) -> None:
        # The policy may also change outside the widgets (another cell, another agent's panel).
        everything = self._policy.everything
        approved = self._policy.is_approved(self.agent_id)
        self._syncing = True
        try:
            if self.always_checkbox.value != approved:
                self.always_checkbox.value = approved
            if self.always_checkbox.disabled != everything:
                self.always_checkbox.disabled = everything
        finally:
            self._syncing = False

    # -- the standing decision -------------------------------------------------------------

    def _policy_changed(self) -> None:
        # A standing decision set elsewhere also answers what this agent waits for here.
        if self._policy.is_approved(self.agent_id) and self.pending_count:
            self.approve_pending()
        self.refresh()

    def _on_checkbox(self, change: dict) -> None:
        if self._syncing:
            return
        if change["new"]:
            self._policy.always(self.agent_id)
            self.approve_pending()
        else:
            self._policy.clear(self.agent_id)
        self.refresh()

    def always_approve(self) -> None:
        """Set the standing decision for this agent and approve what it waits for now."""
        if not self._policy.is_approved(self.agent_id):
            self._policy.always(self.agent_id)
        self.approve_pending()
        self.refresh()

    def approve_pending(self) -> None:
        for call in list(self.calls.values()):
            call.decide(True)

    # -- events ----------------------------------------------------------------------------

    def handle(self, event: AgentEvent) -> None:
        """Show one event of this agent."""
        match event:
            case ModelUsage(input_tokens=tokens_in, output_tokens=tokens_out, cost=cost):
                self.tokens += tokens_in + tokens_out
                if cost is not None:
                    self.cost = (self.cost or Decimal(0)) + cost
                self.refresh()
            case TurnStarted(turn=turn):
                self.turns = turn
                if self.state == "starting":
                    self.state = "running"
            case ModelRetry() as retry:
                self.retries += 1
                of = f"/{retry.attempts}" if retry.attempts else ""
                self.model_note = f"attempt {retry.attempt}{of} · {retry.reason}"
                self._note_until = retry.at + retry.wait  # wall clock: a replayed retry is long over
                self.text.drop_partial()
            case ModelSlot(waiting=waiting, limit=limit):
                self.model_note = f"waiting for a model slot ({limit} in flight)" if waiting else ""
                self._note_until = None
            case ResponseChunk(content=content):
                self.text.stream_text(content)
            case Response(content=content):
                self.text.complete_text(content)
            case ThoughtsChunk(content=content) if not self.subagent:
                self.text.stream_thoughts(content)
            case Thoughts(content=content) if not self.subagent:
                self.text.complete_thoughts(content)
            case ApprovalRequest():
                self._add_call(event)
            case CodeExecutionOutputChunk(tool_call_id=call_id, content=text):
                if call := self.calls.get(call_id):
                    call.add_output(text)
            case CodeExecutionOutput(tool_call_id=call_id):
                if call := self.calls.get(call_id):
                    call.set_output(event)
            case ToolOutput(tool_call_id=call_id):
                call = self.calls.get(call_id) or self._add_refused_call(event)
                call.set_result(event)
            case HookFailed() | ContextCompacted():
                self._append(widgets.HTML(_html.event_note(event)))
            case SubagentMessage(content=text, sender=sender):
                source = "you" if sender == "user" else f"its parent {event.agent_id}"
                self._append(widgets.HTML(f'<div class="freeact-message">→ message from {_html.escape(source)}: '
                                          f"{_html.escape(text)}</div>"))
            case SubagentReport(parent_id=parent, content=text):
                self._append(widgets.HTML(f'<div class="freeact-report">↑ reports to {_html.escape(parent)}: '
                                          f"{_html.escape(text)}</div>"))
            case RunCancelled():
                self.finish("cancelled")
        self.refresh()

    def task_call(self, tool_call_id: str) -> CallView | None:
        """The call that started a subagent: a `task` call, or the cell whose code did (a correction is `…-fix`)."""
        return self.calls.get(tool_call_id) or self.calls.get(tool_call_id.removesuffix("-fix"))

    def attach_subagent(self, tool_call_id: str, panel: AgentPanel, *, nest: bool = True) -> None:
        """Nest a subagent's panel under the `task` call that started it; with `nest=False` (or without that call)
        put it at the end of this panel instead."""
        if nest and (call := self.task_call(tool_call_id)):
            call.attach_subagent(panel)
        else:
            self._append(panel)

    def note_placed_below(self, parent_id: str) -> None:
        """Say why this subagent's panel is not under its `task` call: questions waited below that call."""
        self._append(widgets.HTML(f'<div class="freeact-meta">Started by {_html.escape(parent_id)}\'s '
                                  f'"{_html.escape(self.description or "task")}" call above; shown down here so that '
                                  "the questions waiting below that call did not move.</div>"))

    def finish(self, state: AgentState, *, elapsed: float | None = None, turns: int | None = None) -> None:
        """The agent ended: freeze the clock and take away buttons no one can use any more."""
        if self.finished and state != "failed":
            return
        self.state = state
        self._elapsed = elapsed if elapsed is not None else time.monotonic() - self._started
        if turns is not None:
            self.turns = turns
        for call in self.calls.values():
            call.cancel()
            call.give_up_place()
        if self.stop_button is not None:  # nothing left to stop or to tell: the controls go
            self.stop_button.disabled = True
            self.stop_button.layout.display = "none"
        if self.message_box is not None:
            self.message_text.disabled = self.send_button.disabled = True
            self.message_box.layout.display = "none"
        self.refresh()

    def fail(self, message: str) -> None:
        self.error = message
        self.finish("failed")

    # -- building blocks -------------------------------------------------------------------

    def _append(self, widget: widgets.Widget) -> None:
        self._body.children = (*self._body.children, widget)

    def _add_call(self, request: ApprovalRequest) -> None:
        call = CallView(
            tool_name=request.tool_name,
            tool_call_id=request.tool_call_id,
            request=request,
            on_change=self.refresh,
            on_always=self.always_approve,
        )
        self.calls[request.tool_call_id] = call
        if call.pending and self.folded:
            self.fold(False)  # a question for a person is never hidden
        if (row := batch_row(request.tool_call_id)) and (card := self.batch_cards.get(row[0])):
            card.add_call(row[1], call)  # folded under its row of the batch's card
        elif request.source == "code" and (cell := self.calls.get(request.cell_call_id or "")):
            cell.attach_subagent(call)  # an MCP call made by a cell's code is shown inside that cell
        else:
            self._append(call)

    def _add_refused_call(self, event: ToolOutput) -> CallView:
        call = CallView(tool_name=event.tool_name, tool_call_id=event.tool_call_id)
        self.calls[event.tool_call_id] = call
        self._append(call)
        return call
