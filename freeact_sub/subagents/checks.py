"""Whether a call of the `task` family can work, before anyone is asked to approve it (and again when it runs):
an empty prompt, an unknown or main-only agent type, a model the type does not offer, `resume` with `fork`, a
child that is no child of this agent or still runs, the `max_children` limit."""

from __future__ import annotations

from typing import Any

from ..config import agent_types
from ..models.options import ModelOption, find_option
from .jobs import Jobs

__all__ = ["TaskChecks"]


class TaskChecks:
    """Checks the `task` calls of one agent against its tree's types and its own children."""

    def __init__(self, jobs: Jobs) -> None:
        self._jobs = jobs

    def check(self, name: str, arguments: dict[str, Any]) -> str | None:
        """Why a call of the `task` family cannot work, before anyone is asked to approve it; None if it can.

        Its arguments fit the schema already; this catches what the schema cannot know: an empty
        prompt, an unknown agent type, `resume` with `fork`, an id that is no child of this agent.
        """
        if name in ("task_output", "task_stop", "task_send"):
            job = self._jobs.own(arguments["agent_id"])
            if isinstance(job, str):
                return job
            if name == "task_send" and (job.finished.is_set() or job.agent_id not in self._jobs.running):
                return (f"The subagent {job.agent_id} has ended ({job.status or 'ending'}): it cannot read messages "
                        f"any more. `task(resume=\"{job.agent_id}\", prompt=...)` continues it with your message.")
            return None
        if name != "task":
            return None
        if not str(arguments.get("prompt") or "").strip():
            return "The `prompt` is empty: no subagent started. Say what the subagent should do."
        resume, fork = arguments.get("resume"), arguments.get("fork", False)
        if resume is not None and fork:
            return "Give either `resume` or `fork`, not both: no subagent started."
        agent_type = arguments.get("subagent_type") or agent_types.GENERAL
        if resume is not None and agent_type == agent_types.GENERAL:
            agent_type = self.resumed_type(resume)
        startable = [name for name, definition in self._jobs.tree.agent_types.items() if definition.mode != "primary"]
        known = ", ".join(f"`{name}`" for name in startable)
        if agent_type not in self._jobs.tree.agent_types:
            return f"Unknown subagent_type {agent_type!r}: no subagent started. The agent types are {known}."
        if self._jobs.tree.agent_types[agent_type].mode == "primary":
            return (f"The agent type {agent_type!r} runs only as the main agent (mode: primary): no subagent "
                    f"started. The types you can start are {known}.")
        if resume is None and (over := self.over_child_limit()) is not None:
            return over
        if isinstance(model := arguments.get("model"), str):
            picked = self.pick_model(agent_type, model)
            if isinstance(picked, str):
                return picked
        if resume is not None:
            if resume in self._jobs.running:
                return f"Cannot resume {resume!r}: it is still running."
            if resume not in self._jobs.ended and self._jobs.parent.conversation.saved_child(resume) is None:
                why = "it is not a subagent of yours that has finished. `task_list` lists them"
                return f"Cannot resume {resume!r}: {why}."
        return None

    def resumed_type(self, agent_id: str) -> str:
        """The type a child to resume had (one that ended in this process, else as its session saved it)."""
        ended = self._jobs.ended.get(agent_id)
        if ended is not None:
            return str(getattr(ended, "subagent_type", agent_types.GENERAL))
        saved = next((s for s in self._jobs.parent.conversation.saved_children() if s.agent_id == agent_id), None)
        return saved.type if saved is not None and saved.type in self._jobs.tree.agent_types else agent_types.GENERAL

    def resumed_model(self, agent_id: str, agent_type: str) -> ModelOption | None:
        """The model a child to resume ran on; None: its type's default (a saved model no longer offered too)."""
        ended = self._jobs.ended.get(agent_id)
        if ended is not None:
            return ModelOption(model=ended.config.model, model_settings=ended.config.model_settings)
        saved = next((s for s in self._jobs.parent.conversation.saved_children() if s.agent_id == agent_id), None)
        if saved is None or not saved.model:
            return None
        definition = self._jobs.tree.agent_types[agent_type]
        return find_option(agent_types.model_options(definition, self._jobs.parent.settings), saved.model)

    def pick_model(self, agent_type: str, name: str) -> ModelOption | str:
        """The model a `task` call's `model` picks for a child of `subagent_type`, or the refusal the model reads."""
        definition = self._jobs.tree.agent_types.get(agent_type)
        if definition is None:
            return f"Unknown subagent_type {agent_type!r}: no subagent started."
        parent = self._jobs.parent
        return agent_types.pick_model(definition, agent_type, parent.settings, parent.model, name)

    def over_child_limit(self) -> str | None:
        """The refusal of a new child past `max_children`; None while under it."""
        limit = self._jobs.parent.settings.max_children
        if limit is None or self._jobs.started_children < limit:
            return None
        plural = "s" if limit != 1 else ""
        return (f"You have started your limit of {limit} subagent{plural} (max_children={limit}): no subagent "
                "started. Do this job yourself, or `resume` a subagent that finished.")
