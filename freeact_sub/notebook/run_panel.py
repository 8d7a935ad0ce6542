"""`RunPanel`: the widget tree of one run — the prompt, a Stop button, and the agents' panels."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets

from freeact_sub import AgentEvent, ApprovalPolicy, SubagentFinished, SubagentStarted

from . import _html
from ._style import STYLESHEET
from .agent_panel import AgentPanel, AgentState

__all__ = ["RunPanel"]


class RunPanel(widgets.VBox):
    """The main agent's panel with each subagent's panel nested under the `task` call that started it.

    Events are routed by `agent_id`: a `SubagentStarted` from an agent creates the child's panel,
    and every later event tagged with the child's id lands there.
    """

    def __init__(
        self,
        agent_id: str,
        prompt: str,
        *,
        policy: ApprovalPolicy,
        on_stop: Callable[[], None],
        auto_approve_note: str | None = None,
    ) -> None:
        super().__init__()
        self.add_class("freeact-run")
        self.main = AgentPanel(agent_id, policy=policy)
        self.panels: dict[str, AgentPanel] = {agent_id: self.main}
        """Every agent's panel in this run, by agent id."""
        self._policy = policy
        self.stop_button = widgets.Button(description="Stop", button_style="danger", icon="stop")
        self.stop_button.add_class("freeact-stop")
        self.stop_button.on_click(lambda _: on_stop())
        self.status = widgets.HTML()
        prompt_line = widgets.HTML(f"<b>Prompt:</b> {_html.escape(prompt)}")
        header = widgets.HBox([self.stop_button, self.status, prompt_line])
        header.add_class("freeact-run-header")
        parts: list[widgets.Widget] = [widgets.HTML(STYLESHEET), header]
        self.banner_shown = bool(auto_approve_note)
        """Whether the run says that every action is approved without asking."""
        if auto_approve_note:
            banner = widgets.HTML(auto_approve_note)
            banner.add_class("freeact-banner")
            banner.add_class("freeact-auto-approve")
            parts.append(banner)
        parts.append(self.main)
        self.children = tuple(parts)
        self.set_status("starting")

    def __repr__(self) -> str:
        # what a front end without widgets shows (`text/plain`), instead of the whole widget tree
        return f"<freeact-sub run of {self.main.agent_id}: open the notebook in JupyterLab to see the widgets>"

    def set_status(self, text: str) -> None:
        self.status.value = f'<span class="freeact-run-status">{_html.escape(text)}</span>'

    def handle(self, event: AgentEvent) -> None:
        """Show one event in the panel of the agent it belongs to."""
        match event:
            case SubagentStarted(subagent_id=child_id, tool_call_id=call_id, max_turns=max_turns):
                panel = AgentPanel(child_id, policy=self._policy, subagent=True, max_turns=max_turns)
                self.panels[child_id] = panel
                self._panel(event.agent_id).attach_subagent(call_id, panel)
            case SubagentFinished(subagent_id=child_id, status=status, elapsed=elapsed, turns_used=turns):
                state: AgentState = "turn limit" if status == "turn_limit" else status
                self._panel(child_id).finish(state, elapsed=elapsed, turns=turns)
            case _:
                self._panel(event.agent_id).handle(event)

    def _panel(self, agent_id: str) -> AgentPanel:
        panel = self.panels.get(agent_id)
        if panel is None:  # an agent we were not told about: show it rather than drop its events
            panel = self.panels[agent_id] = AgentPanel(agent_id, policy=self._policy, subagent=True)
            self.children = (*self.children, panel)
        return panel

    def tick(self) -> None:
        """Advance the clocks of the agents still running."""
        for panel in self.panels.values():
            if not panel.finished:
                panel.refresh()

    def end(self, state: AgentState, error: str | None = None) -> None:
        """The run is over: every agent still shown as running ends with it; Stop no longer applies."""
        for panel in self.panels.values():
            if panel is not self.main and not panel.finished:
                panel.finish("cancelled" if state != "done" else "done")
        if error is not None:
            self.main.fail(error)
        else:
            self.main.finish(state)
        self.stop_button.disabled = True
        self.set_status(state)
