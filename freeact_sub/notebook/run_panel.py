"""`RunPanel`: one run — a sticky header (Stop, status, pending approvals, prompt) and the agents' panels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from freeact_sub import (
    AgentEvent,
    ApprovalPolicy,
    ModelUsage,
    ProjectPowers,
    SubagentFinished,
    SubagentMessage,
    SubagentQueued,
    SubagentStarted,
    Usage,
)

from . import _html, _order, _static
from ._style import STYLESHEET
from .agent_panel import AgentPanel, AgentState
from .batch_card import BatchCards
from .timeline_view import TimelineView
from .trust_panel import TrustPanel

__all__ = ["APPROVE_ALL_NOTE", "RunPanel"]

APPROVE_ALL_NOTE = ("Auto-approve is on (Approve all agents): every action of every agent runs without asking, in "
                    "this run and later ones, until you release Approve all agents above.")


class RunPanel(widgets.VBox):
    """The main agent's panel with each subagent's panel nested under the `task` call that started it.

    Events are routed by `agent_id`: a `SubagentStarted` from an agent creates the child's panel,
    and every later event tagged with the child's id lands there. The header stays in sight
    while the transcript scrolls, with Stop, the number of calls waiting for approval and
    **Approve all agents** (the standing decision for every agent, as `A` in the terminal).
    """

    def __init__(
        self,
        agent_id: str,
        prompt: str,
        *,
        policy: ApprovalPolicy,
        on_stop: Callable[[], None],
        auto_approve_note: str | None = None,
        on_stop_agent: Callable[[str], None] | None = None,
        on_send: Callable[[str, str], str | None] | None = None,
    ) -> None:
        super().__init__()
        self._on_stop_agent = on_stop_agent
        self._on_send = on_send
        self.add_class("freeact-run")
        self.add_class("freeact-live")  # only the live widgets: the static copy hides itself next to them
        self._policy = policy
        self.stop_button = widgets.Button(description="Stop", button_style="danger", icon="stop",
                                          layout=widgets.Layout(width="auto"))
        self.stop_button.add_class("freeact-stop")
        self.stop_button.on_click(lambda _: on_stop())
        self.status = widgets.HTML()
        self.pending_count = widgets.HTML()
        self.pending_count.add_class("freeact-pending-status")
        self.usage_line = widgets.HTML()
        self.usage_line.add_class("freeact-run-usage-line")
        """The run's tokens and cost so far, every agent's model responses summed."""
        self.usage = Usage()
        """What the line shows: the `ModelUsage` of every agent in this run, added up."""
        self.approve_all_button = widgets.ToggleButton(
            value=policy.everything, description="Approve all agents", icon="check",
            layout=widgets.Layout(width="auto"),
            tooltip="On: approve what every agent waits for now, and every later action of every agent, without "
                    "asking (as `A` in the terminal). Off: ask again (each agent's own standing approval stays).",
        )
        """A toggle for the standing decision for every agent (`ApprovalPolicy.always_all`): pressed while it stands,
        in every run of the agent; releasing it asks again."""
        self.approve_all_button.add_class("freeact-approve-all")
        self.approve_all_button.observe(self._approve_all_toggled, names="value")
        prompt_line = widgets.HTML(f'<span class="freeact-prompt-text" title="{_html.escape(prompt)}">'
                                   f"<b>Prompt:</b> {_html.escape(prompt)}</span>")
        prompt_line.add_class("freeact-prompt")
        header = widgets.HBox([self.stop_button, self.status, self.pending_count, self.approve_all_button,
                               self.usage_line, prompt_line])
        header.add_class("freeact-run-header")
        self.main = self._new_panel(agent_id, subagent=False)
        self.panels: dict[str, AgentPanel] = {agent_id: self.main}
        """Every agent's panel in this run, by agent id."""
        self.batches = BatchCards(self._panel)
        """The `map_tasks` batches of this run, each a card under its question."""
        stylesheet = widgets.HTML(STYLESHEET)
        stylesheet.add_class("freeact-stylesheet")
        parts: list[widgets.Widget] = [stylesheet, header]
        self._auto_approve_note = auto_approve_note
        self._banner = widgets.HTML()
        self._banner.add_class("freeact-banner")
        self._banner.add_class("freeact-auto-approve")
        parts.append(self._banner)
        parts.append(self.main)
        self.timeline = TimelineView()
        """The run's timeline, under the agents' panels."""
        parts.append(self.timeline)
        self.children = tuple(parts)
        self._pending_before = 0
        """The pending count at the last look: a drop means a decision."""
        self.start_steps: list[str] = []
        """What the agent's start said it waited for, in order (`Agent.start(progress=…)`)."""
        self.state = "starting"
        """The run's status as the header shows it (`done`, `cancelled`, `failed` once it ended)."""
        self.set_status("starting")
        self._show_pending()
        policy.subscribe(self._policy_changed)
        self._policy_changed()

    @property
    def banner_shown(self) -> bool:
        """Whether the run says, now, that every action is approved without asking."""
        return bool(self._banner.value)

    def _approve_all_toggled(self, change: dict[str, Any]) -> None:
        if change["new"] == self._policy.everything:
            return  # the policy moved the toggle
        if change["new"]:
            self._policy.always_all()
            return
        agents = self._policy.agent_ids  # releasing the toggle asks again, but keeps each agent's own decision
        self._policy.clear_all()
        for agent_id in agents:
            self._policy.always(agent_id)

    def _policy_changed(self) -> None:
        # every agent's panel answers what it waits for by itself (it follows the policy too)
        everything = self._policy.everything
        self.approve_all_button.value = everything
        self._banner.value = (self._auto_approve_note or APPROVE_ALL_NOTE) if everything else ""
        self._banner.layout.display = None if everything else "none"
        if not everything:
            self._auto_approve_note = None  # turned off: what turned it on before no longer holds

    def __repr__(self) -> str:
        # instead of the whole widget tree; no state: it would be stale as soon as the run goes on
        return f"<freeact-sub run of {self.main.agent_id}>"

    def ask_trust(self, project: ProjectPowers, on_decision: Callable[[bool], None]) -> TrustPanel:
        """Show the question whether to trust the working folder, above the main agent's panel."""
        def decided(trusted: bool) -> None:
            self.main.waiting_for_trust = False
            self.main.refresh()
            self.approve_all_button.disabled = False
            on_decision(trusted)

        panel = TrustPanel(project, on_decision=decided)
        index = self.children.index(self.main)
        self.children = (*self.children[:index], panel, *self.children[index:])
        self.set_status("waiting: trust this folder?")
        self.main.waiting_for_trust = True  # its badge says what it waits for, not "starting"
        self.main.refresh()
        self.approve_all_button.disabled = True  # nothing to approve before the agent exists
        return panel

    def show_files(self, instructions: list[str], skills: dict[str, str], left_out: list[str]) -> None:
        """Say which instruction files and skills went into the system prompt, above the main agent's panel."""
        if not instructions and not skills and not left_out:
            return  # a missing file is silence
        told = ", ".join(_html.escape(path) for path in instructions) or "none"
        summary = f"<b>Instructions:</b> {told} · <b>skills:</b> {len(skills)}"
        items = [f"<li><b>{_html.escape(name)}</b> {_html.escape(about)}</li>" for name, about in skills.items()]
        items += [f'<li class="freeact-warning">{_html.escape(note)}</li>' for note in left_out]
        line = widgets.HTML(f"<details><summary>{summary}</summary><ul>{''.join(items)}</ul></details>")
        line.add_class("freeact-files")
        index = self.children.index(self.main)
        self.children = (*self.children[:index], line, *self.children[index:])

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The widget with an empty `text/plain`: the run's static copy beside it is its text. An untrusted notebook
        (and any front end without widgets) shows `text/plain` in the widget's place, which read as a stray
        `<freeact-sub run of …>` line above the transcript."""
        view = {"version_major": 2, "version_minor": 0, "model_id": self.model_id}
        return {"text/plain": "", "application/vnd.jupyter.widget-view+json": view}

    def start_step(self, text: str) -> None:
        """Say what the agent's start waits for now (`starting the kernel`, …) in the header and beside the main
        agent's badge (the one a narrow notebook shows); an empty `text`: the start is over."""
        if text:
            self.start_steps.append(text)
            self.set_status(f"starting: {text}…")
        self.main.model_note = f"{text}…" if text else ""
        self.main.refresh()

    def set_status(self, text: str) -> None:
        self.state = text
        self.status.value = f'<span class="freeact-run-status">{_html.escape(text)}</span>'

    @property
    def pending(self) -> int:
        """How many calls of all agents in this run wait for a person's decision."""
        return sum(panel.pending_count for panel in self.panels.values())

    def _show_pending(self) -> None:
        if not hasattr(self, "panels"):  # the main panel reports while it is being built
            return
        count = self.pending
        if count < self._pending_before:  # only a decision lets an answered card give up its place
            _order.release_answered(self)
        self._pending_before = count
        text = f"{count} waiting for approval" if count else ""
        value = f'<span class="freeact-pending-count" data-pending="{count}">{text}</span>'
        if self.pending_count.value != value:
            self.pending_count.value = value

    def _count(self, event: ModelUsage) -> None:
        self.usage = self.usage + Usage(
            requests=1, input_tokens=event.input_tokens, output_tokens=event.output_tokens, cost=event.cost,
            unpriced_requests=int(event.cost is None),
        )
        usage = self.usage
        cost = "cost unknown" if usage.cost is None else f"${usage.cost:.4f}"
        if usage.cost is not None and usage.unpriced_requests:
            cost += f" + {usage.unpriced_requests} unpriced"
        title = f"{usage.input_tokens:,} in, {usage.output_tokens:,} out, {usage.requests} model responses, every agent"
        self.usage_line.value = (f'<span class="freeact-run-usage" title="{_html.escape(title)}">'
                                 f"{usage.total_tokens:,} tokens · {_html.escape(cost)}</span>")

    def _new_panel(self, agent_id: str, *, subagent: bool = True, max_turns: int | None = None) -> AgentPanel:
        return AgentPanel(
            agent_id, policy=self._policy, subagent=subagent, max_turns=max_turns, on_change=self._show_pending,
            on_stop=self._on_stop_agent if subagent else None, on_send=self._on_send if subagent else None,
        )

    def static_html(self) -> str:
        """The run as it looks now, as HTML that shows without a live kernel."""
        return _static.static_html(self)

    def static_text(self) -> str:
        """The run as it looks now, as plain text."""
        return _static.static_text(self)

    def handle(self, event: AgentEvent) -> None:
        """Show one event in the panel of the agent it belongs to (and on the timeline)."""
        self.timeline.add(event)
        if isinstance(event, ModelUsage):
            self._count(event)
        batch = self.batches.before(event)
        self._show(event)
        self.batches.after(event, batch)

    def _show(self, event: AgentEvent) -> None:
        match event:
            case SubagentQueued(subagent_id=child_id, tool_call_id=call_id):
                panel = self._new_panel(child_id)
                panel.set_kind(event.agent_type, event.description, "")
                panel.wait_for_slot()
                self.panels[child_id] = panel
                self._attach(event.agent_id, call_id, panel)
            case SubagentStarted(subagent_id=child_id, tool_call_id=call_id, max_turns=max_turns):
                queued = self.panels.get(child_id)
                panel = queued or self._new_panel(child_id, max_turns=max_turns)
                if queued is not None:
                    queued.start(max_turns)
                panel.set_kind(event.agent_type, event.description, event.model)
                if event.sandbox:
                    panel.set_sandbox(event.sandbox, event.sandbox_limits)
                if queued is None:
                    self.panels[child_id] = panel
                    self._attach(event.agent_id, call_id, panel)
            case SubagentFinished(subagent_id=child_id, status=status, elapsed=elapsed, turns_used=turns):
                state: AgentState = "turn limit" if status == "turn_limit" else status
                if event.waited >= 0.1:
                    self._panel(child_id).set_waited(event.waited)
                self._panel(child_id).finish(state, elapsed=elapsed, turns=turns)
            case SubagentMessage(subagent_id=child_id):
                self._panel(child_id).handle(event)  # shown where it is read: in the subagent's panel
            case _:
                self._panel(event.agent_id).handle(event)

    def _attach(self, parent_id: str, tool_call_id: str, panel: AgentPanel) -> None:
        """Nest a subagent's panel under its `task` call, unless a question waits below that call: then the panel
        goes below the waiting questions (at the end of its parent's panel, or of the run), so none of them moves."""
        parent = self._panel(parent_id)
        call = parent.task_call(tool_call_id)
        if call is None or not _order.waits_after(self, call):
            parent.attach_subagent(tool_call_id, panel)
            return
        panel.note_placed_below(parent_id)
        if not _order.waits_after(self, parent):
            parent.attach_subagent(tool_call_id, panel, nest=False)
        else:
            self.children = (*self.children[:-1], panel, self.timeline)

    def _panel(self, agent_id: str) -> AgentPanel:
        panel = self.panels.get(agent_id)
        if panel is None:  # an agent we were not told about: show it rather than drop its events
            panel = self.panels[agent_id] = self._new_panel(agent_id)
            self.children = (*self.children[:-1], panel, self.timeline)
        return panel

    def tick(self) -> None:
        """Advance the clocks of the agents still running."""
        for panel in self.panels.values():
            if not panel.finished:
                panel.refresh()
        self.batches.tick()
        self.timeline.refresh()

    def end(self, state: AgentState, error: str | None = None, *, still_running: frozenset[str] = frozenset()) -> None:
        """The run is over: every agent still shown as running ends with it, except background subagents that go on
        (`still_running`: their panels stay live); the run's Stop no longer applies."""
        for panel in self.panels.values():
            if panel is not self.main and not panel.finished and panel.agent_id not in still_running:
                panel.finish("cancelled" if state != "done" else "done")
        if error is not None:
            self.main.fail(error)
        else:
            self.main.finish(state)
        self.stop_button.disabled = True
        self.set_status(state)
        self.timeline.refresh(force=True)
