"""Saved transcripts as the panels a live run shows: earlier turns of a resumed agent, a finished child.

A transcript is replayed (`SavedSession.events`) into the same `RunPanel` a live run fills, one
panel per user turn, so what a person sees of a saved conversation looks like what they saw live.
"""

from __future__ import annotations

import ipywidgets as widgets

from freeact_sub import AgentEvent, ApprovalPolicy
from freeact_sub.sessions import SavedSession, UserPrompt

from .run_panel import RunPanel

__all__ = ["earlier_turns", "saved_runs", "transcript_panel"]


def saved_runs(saved: SavedSession, agent_id: str | None = None) -> list[RunPanel]:
    """One finished `RunPanel` per user turn of an agent's transcript (a subagent has one: its task)."""
    agent_id = agent_id or saved.main_id
    policy = ApprovalPolicy()  # a replay asks nothing; its own policy keeps the live one untouched
    runs: list[RunPanel] = []
    turn: list[AgentEvent] = []
    prompt: str | None = None

    def close() -> None:
        if prompt is None and not turn:
            return
        panel = RunPanel(agent_id, prompt or "", policy=policy, on_stop=lambda: None)
        panel.add_class("freeact-saved")
        for event in turn:
            panel.handle(event)
        panel.end("done")
        runs.append(panel)

    for event in saved.events(agent_id):
        if isinstance(event, UserPrompt):
            if event.agent_id == agent_id:
                close()
                prompt, turn = event.content, []
            continue
        turn.append(event)
    close()
    return runs


def transcript_panel(saved: SavedSession, agent_id: str | None = None) -> widgets.VBox:
    """Every turn of one agent's saved transcript (any agent of the session: a finished child, say)."""
    box = widgets.VBox(saved_runs(saved, agent_id))
    box.add_class("freeact-transcript")
    return box


def earlier_turns(saved: SavedSession, agent_id: str | None = None) -> widgets.Accordion | None:
    """The turns saved before this process resumed the session, collapsed under one title; None if there are none."""
    runs = saved_runs(saved, agent_id)
    if not runs:
        return None
    accordion = widgets.Accordion(children=[widgets.VBox(runs)], selected_index=None)
    count = len(runs)
    accordion.set_title(0, f"Earlier turns of session {saved.session_id} ({count} turn{'s' if count != 1 else ''})")
    accordion.add_class("freeact-earlier-turns")
    return accordion
