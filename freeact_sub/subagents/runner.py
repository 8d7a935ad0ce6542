"""The `task` tool: run a child agent for an isolated job and return only its final answer.

A child has its parent's model, model settings, system prompt and MCP configuration, but a
fresh kernel (from the tree's pool), new MCP connections, its own id and no `task` tool. At
most `max_subagents` children exist at once in the tree: the bound is taken before the child's
kernel is acquired. Every event of the child flows into the parent's stream tagged with the
child's id; `SubagentStarted` / `SubagentFinished` (tagged with the parent's id) frame its life.
Whatever happens in the child (done, failed, cancelled, turn limit) it is stopped at once when
it ends. Children are built and registered by the `AgentTree`; this module never needs `Agent`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..config.agent_types import GENERAL, configure, confine, model_options, pick_model
from ..errors import ConfigError
from ..events import (
    AgentEvent,
    ApprovalRequest,
    Response,
    SubagentFinished,
    SubagentMessage,
    SubagentQueued,
    SubagentStarted,
    SubagentStatus,
)
from ..models.options import ModelOption, find_option, model_label
from ..tools.names import tool_allowed
from ..tree.registry import AgentTree, ChildSpec, TreeMember

Emit = Callable[[AgentEvent], None]

__all__ = ["DEFAULT_MAX_TURNS", "SubagentRunner"]

DEFAULT_MAX_TURNS = 10
"""A child's turn limit when neither the `task` call nor its agent type sets one."""


_FORK_NOTE = (
    "[You are a fork of {parent}: the conversation above is a copy of its conversation up to the moment it "
    "started you. Your IPython kernel is new: the variables, imports and definitions of that conversation are "
    "gone. Work on the job below and answer with your result.]"
)
_RESUME_NOTE = (
    "[You are resumed after you had finished: your IPython kernel is new, so the variables, imports and "
    "definitions of your earlier work are gone (files you wrote remain).]"
)
_RESUME_INTERRUPTED_NOTE = (
    "[You are resumed after your work was cut short before you finished (the session ended, or you were "
    "stopped): a call that was running then may have done part of its work. Your IPython kernel is new, so the "
    "variables, imports and definitions of your earlier work are gone (files you wrote remain).]"
)
_TAIL_CHARS = 1500


@dataclass
class _Job:
    """A child of this agent (in the foreground or the background), running or ended."""

    agent_id: str
    description: str
    subagent_type: str
    started_at: float
    background: bool = False
    model: str = ""
    """The name of the model it runs on."""
    task: asyncio.Task[None] | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    status: SubagentStatus | None = None
    result: str = ""
    said: str = ""
    """What it has said so far (its model's text), for `task_output` while it runs."""
    elapsed: float = 0.0
    turns: int = 0
    """Model rounds it used (set when it ends)."""
    told: bool = False
    """Whether the parent's model has been told how it ended (by `task_output`, or `task_stop` said it won't be)."""
    unread: int = 0
    """Messages sent to it (`task_send`, the person's) that it ended before reading."""

    @property
    def note(self) -> str:
        """What the parent's model reads, once, when this background child has ended."""
        unread = ""
        if self.unread:
            plural = "s" if self.unread != 1 else ""
            unread = f" It ended before it read {self.unread} message{plural} sent to it."
        ended = f"[The background subagent {self.agent_id} has ended ({self.status}).{unread} Its result:]"
        return f"{ended}\n{self.result}"


class SubagentRunner:
    """Starts and cleans up the children of one agent, through its tree: in the foreground, in the
    background, resumed or forked; and answers `task_output`, `task_stop` and `task_list`."""

    def __init__(self, tree: AgentTree, parent: TreeMember) -> None:
        self._tree = tree
        self._parent = parent
        self._jobs: dict[str, _Job] = {}
        """The background children (`task_output` and `task_stop` manage these only)."""
        self._children: dict[str, _Job] = {}
        """Every child this agent started, foreground and background, running or ended (for `task_list`)."""
        self._notes: list[str] = []
        """Background children that ended and whose end the parent's model has not been told."""
        self._ended: dict[str, TreeMember] = {}
        """Children that finished, by id (to resume them)."""
        self._started_children = 0
        """New children this agent started over its life (resumed ones are not new), for `max_children`."""

    @property
    def running(self) -> dict[str, TreeMember]:
        """The children of this agent alive now, by agent id."""
        return {record.agent_id: record.agent for record in self._tree.children(self._parent.agent_id)}

    def take_notes(self) -> list[str]:
        """The notes on background children that ended since the model was last told (each handed out once)."""
        notes, self._notes = self._notes, []
        return notes

    def put_back(self, notes: list[str]) -> None:
        """Notes whose model request failed: told at the next one instead."""
        self._notes[:0] = notes

    def announce(self, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
        """Tell the tree of a response's `task` calls `(call id, arguments)` that will start a child running code
        under this agent's profile, the tree's main pool's (new or resumed, not kernel-less or under a profile of
        its type's own): their kernels boot while the calls wait for approval. Returns the ids announced, for
        `withdraw` once the calls have run."""
        tree, parent = self._tree, self._parent
        if parent.sandbox != tree.sandbox:
            return []
        announced = []
        for call_id, arguments in calls:
            name = arguments.get("subagent_type") or GENERAL
            definition = tree.types.get(name) if isinstance(name, str) else None
            if definition is None or definition.sandbox is not None:
                continue
            if tool_allowed("execute_ipython_cell", definition.tools, definition.disallowed_tools):
                announced.append(call_id)
        if announced:
            tree.announce(parent.agent_id, announced)
        return announced

    def withdraw(self, call_ids: list[str]) -> None:
        """The calls `announce` named have run, or will not: those that started no child are expected no more."""
        if call_ids:
            self._tree.withdraw(self._parent.agent_id, call_ids)

    def check(self, name: str, arguments: dict[str, Any]) -> str | None:
        """Why a call of the `task` family cannot work, before anyone is asked to approve it; None if it can.

        Its arguments fit the schema already; this catches what the schema cannot know: an empty
        prompt, an unknown agent type, `resume` with `fork`, an id that is no child of this agent.
        """
        if name in ("task_output", "task_stop", "task_send"):
            job = self._own(arguments["agent_id"])
            if isinstance(job, str):
                return job
            if name == "task_send" and (job.finished.is_set() or job.agent_id not in self.running):
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
        subagent_type = arguments.get("subagent_type") or GENERAL
        if resume is not None and subagent_type == GENERAL:
            subagent_type = self._resumed_type(resume)
        startable = [name for name, definition in self._tree.types.items() if definition.mode != "primary"]
        known = ", ".join(f"`{name}`" for name in startable)
        if subagent_type not in self._tree.types:
            return f"Unknown subagent_type {subagent_type!r}: no subagent started. The agent types are {known}."
        if self._tree.types[subagent_type].mode == "primary":
            return (f"The agent type {subagent_type!r} runs only as the main agent (mode: primary): no subagent "
                    f"started. The types you can start are {known}.")
        if resume is None and (over := self._over_child_limit()) is not None:
            return over
        if isinstance(model := arguments.get("model"), str):
            picked = self._pick_model(subagent_type, model)
            if isinstance(picked, str):
                return picked
        if resume is not None:
            if resume in self.running:
                return f"Cannot resume {resume!r}: it is still running."
            if resume not in self._ended and self._parent.saved_subagent(resume) is None:
                why = "it is not a subagent of yours that has finished. `task_list` lists them"
                return f"Cannot resume {resume!r}: {why}."
        return None

    def _resumed_type(self, agent_id: str) -> str:
        """The type a child to resume had (one that ended in this process, else as its session saved it)."""
        ended = self._ended.get(agent_id)
        if ended is not None:
            return str(getattr(ended, "subagent_type", GENERAL))
        saved = next((s for s in self._parent.saved_subagents() if s.agent_id == agent_id), None)
        return saved.type if saved is not None and saved.type in self._tree.types else GENERAL

    def _resumed_model(self, agent_id: str, subagent_type: str) -> ModelOption | None:
        """The model a child to resume ran on; None: its type's default (a saved model no longer offered too)."""
        ended = self._ended.get(agent_id)
        if ended is not None:
            return ModelOption(model=ended.config.model, model_settings=ended.config.model_settings)
        saved = next((s for s in self._parent.saved_subagents() if s.agent_id == agent_id), None)
        if saved is None or not saved.model:
            return None
        definition = self._tree.types[subagent_type]
        return find_option(model_options(definition, self._parent.settings), saved.model)

    def _pick_model(self, subagent_type: str, name: str) -> ModelOption | str:
        """The model a `task` call's `model` picks for a child of `subagent_type`, or the refusal the model reads."""
        definition = self._tree.types.get(subagent_type)
        if definition is None:
            return f"Unknown subagent_type {subagent_type!r}: no subagent started."
        return pick_model(definition, subagent_type, self._parent.settings, self._parent.model, name)

    def _over_child_limit(self) -> str | None:
        """The refusal of a new child past `max_children`; None while under it."""
        limit = self._parent.settings.max_children
        if limit is None or self._started_children < limit:
            return None
        plural = "s" if limit != 1 else ""
        return (f"You have started your limit of {limit} subagent{plural} (max_children={limit}): no subagent "
                "started. Do this job yourself, or `resume` a subagent that finished.")

    async def call(self, name: str, arguments: dict[str, Any], tool_call_id: str, emit: Emit) -> tuple[str, bool]:
        """Run a call of the `task` family; returns its result and whether it is an error."""
        if name == "task_output":
            return await self._output(arguments["agent_id"], arguments["wait"], arguments["timeout"])
        if name == "task_stop":
            return self._stop(arguments["agent_id"])
        if name == "task_list":
            return self._list(), False
        if name == "task_send":
            return self._send(arguments["agent_id"], arguments["message"], emit)
        return await self.run(
            tool_call_id, arguments["prompt"], arguments.get("max_turns"), emit,
            background=arguments.get("run_in_background", False), resume=arguments.get("resume"),
            fork=arguments.get("fork", False), max_tokens=arguments.get("max_tokens"),
            max_tool_calls=arguments.get("max_tool_calls"), max_cost=arguments.get("max_cost"),
            subagent_type=arguments.get("subagent_type") or GENERAL,
            description=" ".join(str(arguments.get("description") or "").split()), model=arguments.get("model"),
        )

    async def run(
        self, tool_call_id: str, prompt: str, max_turns: int | None, emit: Emit, *, background: bool = False,
        resume: str | None = None, fork: bool = False, max_tokens: int | None = None,
        max_tool_calls: int | None = None, subagent_type: str = GENERAL, description: str = "",
        max_cost: float | None = None, model: str | None = None,
    ) -> tuple[str, bool]:
        """Run one child to its end (or start it in the background); returns the `task` call's result and
        whether it is an error.

        The result is an error when the child failed, stopped at its turn limit or a budget, was
        stopped, or stopped because the user rejected one of its calls: the parent model should
        not take it for a finished job. `model` names one of the models the type allows; a resumed
        child keeps the model it had unless `model` names another.
        """
        parent, tree = self._parent, self._tree
        if resume is not None and subagent_type == GENERAL:  # a resumed child keeps its type
            subagent_type = self._resumed_type(resume)
        definition = tree.types.get(subagent_type)
        if definition is None:
            known = ", ".join(f"`{name}`" for name in tree.types)
            return f"Unknown subagent_type {subagent_type!r}: no subagent started. The agent types are {known}.", True
        picked = self._pick_model(subagent_type, model) if model is not None else None
        if isinstance(picked, str):
            return picked, True
        if picked is None and resume is not None:  # a resumed child keeps its model
            picked = self._resumed_model(resume, subagent_type)
        turns = max_turns or definition.max_turns or DEFAULT_MAX_TURNS
        if not background and tree.slot_never_frees(parent.agent_id):
            slots = tree.config.max_subagents
            return (
                f"No subagent started: all {slots} subagent slot{'s' if slots != 1 else ''} (max_subagents={slots}) "
                f"are held by subagents that each wait for a subagent of their own, so none could ever become free "
                f"for this one. Do this job yourself."
            ), True
        try:
            config = configure(parent.settings, definition, subagent_type, model=parent.model, choice=picked)
            config = config.model_copy(update={"model": tree.resolve_model(config)})
            sandbox, definition = confine(parent.sandbox, definition, subagent_type, config)
        except ConfigError as exc:
            return f"The agent type {subagent_type!r} cannot start: {exc}", True
        max_cost = max_cost if max_cost is not None else definition.max_cost
        if (unpriced := _unpriced(config.model, max_cost, tree.config.max_cost)) is not None:
            return unpriced, True
        if resume is None:
            if (over := self._over_child_limit()) is not None:  # several calls of one response passed `check` at once
                return over, True
            self._started_children += 1
        spec = ChildSpec(config=config, parent_id=parent.agent_id, tool_call_id=tool_call_id, prompt=prompt,
                         subagent_type=subagent_type, definition=definition, description=description,
                         max_tokens=max_tokens, max_tool_calls=max_tool_calls, max_cost=max_cost, sandbox=sandbox)
        if resume is not None and fork:
            return "Give either `resume` or `fork`, not both.", True
        if resume is not None:
            ended = self._ended.pop(resume, None)
            live = resume in self.running
            # a child of an earlier process (the session was resumed) is found in the saved session
            history = ended.history if ended is not None else None if live else parent.saved_subagent(resume)
            if history is None:
                why = "it is still running" if live else "it is not a subagent of yours that has finished"
                return f"Cannot resume {resume!r}: {why}.", True
            note = _RESUME_NOTE if _finished(history) else _RESUME_INTERRUPTED_NOTE
            spec = replace(spec, agent_id=resume, history=history, note=note)
        elif fork:
            history = parent.history[:-1]  # up to this call: the response that makes it has no results yet
            spec = replace(spec, history=history, note=_FORK_NOTE.format(parent=parent.agent_id))
        child = tree.new_child(spec)
        record = tree.agents[child.agent_id]
        job = _Job(child.agent_id, spec.description, spec.subagent_type, time.monotonic(), background=background,
                   model=model_label(config.model))
        self._children.pop(child.agent_id, None)  # a resumed child is listed once, as its latest run
        self._children[child.agent_id] = job
        if not background:
            record.task = asyncio.create_task(self._drive(child, spec, turns, emit, job=job),
                                              name=f"task:{child.agent_id}")
            try:
                return await record.task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # the parent's turn is cancelled
                return _stopped_result(child.agent_id, record.stopped_by, ""), True
        record.background = True
        self._jobs[child.agent_id] = job
        job.task = record.task = asyncio.create_task(self._in_background(child, spec, turns, job),
                                                     name=f"background-task:{child.agent_id}")
        return (
            f"Started the subagent {child.agent_id} in the background. You will be told when it finishes; "
            f"`task_output(agent_id=\"{child.agent_id}\")` gives its state or result, `task_stop` stops it."
        ), False

    async def _in_background(self, child: TreeMember, spec: ChildSpec, max_turns: int, job: _Job) -> None:
        record = self._tree.agents.get(child.agent_id)

        def emit(event: AgentEvent) -> None:
            if isinstance(event, Response) and event.agent_id == child.agent_id and event.content:
                job.said = (job.said + "\n" + event.content)[-_TAIL_CHARS:]
            self._tree.background.emit(event)

        try:
            await self._drive(child, spec, max_turns, emit, job=job)
        except asyncio.CancelledError:
            if record is None or record.stopped_by is None:
                raise  # the parent is stopping

    def _background_ended(self, job: _Job, outcome: tuple[str, bool] | None, stopped_by: str | None) -> None:
        """Record a background child's end and queue its note, before it leaves the tree's registry.

        Queued first, dropped after: a consumer that sees the child gone from `subagents()` and
        starts the next round finds the note there. `outcome` is None when it was cancelled.
        """
        job.elapsed = time.monotonic() - job.started_at
        if outcome is None:
            job.result = _stopped_result(job.agent_id, stopped_by, job.said)
        else:
            job.result = outcome[0]
        job.finished.set()
        if outcome is None and stopped_by is None:
            return  # the parent itself is stopping: nobody is left to tell
        if not job.told:
            self._notes.append(job.note)

    async def _drive(
        self, child: TreeMember, spec: ChildSpec, max_turns: int, emit: Emit, job: _Job | None = None
    ) -> tuple[str, bool]:
        """Take a slot, start the child, run its turn and stop it; returns the result and whether it is an error."""
        parent, tree = self._parent, self._tree
        record = tree.agents[child.agent_id]
        started = time.monotonic()
        status: SubagentStatus = "failed"
        announced = False
        queued = tree.bound.locked()
        if queued:
            emit(SubagentQueued(agent_id=parent.agent_id, subagent_id=child.agent_id, tool_call_id=spec.tool_call_id,
                                prompt=spec.prompt, subagent_type=spec.subagent_type, description=spec.description))
        try:
            await tree.bound.acquire()  # before the child's kernel exists: at most max_subagents child kernels
        except BaseException:  # stopped while it waited for a slot
            if queued:
                emit(SubagentFinished(agent_id=parent.agent_id, subagent_id=child.agent_id,
                                      tool_call_id=spec.tool_call_id, status="cancelled", turns_used=0, elapsed=0.0,
                                      waited=time.monotonic() - started))
            if job is not None:
                job.status = "cancelled"
                if job.background:
                    self._background_ended(job, None, record.stopped_by)  # queued before it leaves the list
                else:
                    job.elapsed = time.monotonic() - job.started_at
                    job.finished.set()
            tree.unregister(child.agent_id)
            raise
        outcome: tuple[str, bool] | None = None
        waited = time.monotonic() - started if queued else 0.0
        started = time.monotonic()
        try:
            record.state = "starting"
            emit(
                SubagentStarted(
                    agent_id=parent.agent_id,
                    subagent_id=child.agent_id,
                    tool_call_id=spec.tool_call_id,
                    prompt=spec.prompt,
                    max_turns=max_turns,
                    subagent_type=spec.subagent_type,
                    description=spec.description,
                    model=getattr(spec.config.model, "model_name", str(spec.config.model)),
                    # a type that runs no code has no kernel to confine: no profile to show
                    sandbox=spec.sandbox.name if tool_allowed(
                        "execute_ipython_cell", child.settings.tools, child.settings.disallowed_tools) else "",
                )
            )
            announced = True
            if child.hooks.wants("SubagentStart"):
                fields = _subagent_fields(spec, child.agent_id)
                await child.hooks.ask("SubagentStart", child.hook_context(), fields, emit)
            await child.start()
            tree.refill(spec.config)
            record.state = "running"
            answer = ""
            requests: list[ApprovalRequest] = []
            async with contextlib.aclosing(child.stream(spec.prompt, max_turns=max_turns)) as events:
                async for event in events:
                    emit(event)
                    if isinstance(event, Response) and event.final and event.agent_id == child.agent_id:
                        answer = event.content
                    elif isinstance(event, ApprovalRequest) and event.agent_id == child.agent_id:
                        requests.append(event)
            status, outcome = _outcome(child, answer, requests, max_turns)
            return outcome
        except asyncio.CancelledError:
            status = "cancelled"
            raise
        except Exception as exc:
            outcome = (f"The subagent {child.agent_id} failed: {type(exc).__name__}: {exc}", True)
            return outcome
        finally:
            if job is not None:
                job.status = status
                job.unread = child.drop_unread()
                if job.background:
                    self._background_ended(job, outcome, record.stopped_by)
            tree.unregister(child.agent_id)
            stopping = asyncio.ensure_future(child.stop())
            try:
                await asyncio.shield(stopping)
            except BaseException:  # cancelled while it stops: its slot is free once it has stopped
                stopping.add_done_callback(lambda _: tree.bound.release())
                raise
            child.finished(status)
            if job is not None:
                job.elapsed = time.monotonic() - job.started_at
                job.turns = child.turns_used
                if not job.background:
                    job.finished.set()
            if status != "failed" or child.history:
                self._ended[child.agent_id] = child
            if announced:
                emit(
                    SubagentFinished(
                        agent_id=parent.agent_id,
                        subagent_id=child.agent_id,
                        tool_call_id=spec.tool_call_id,
                        status=status,
                        turns_used=child.turns_used,
                        elapsed=time.monotonic() - started,
                        usage=tree.usage.of(child.agent_id),
                        waited=waited,
                    )
                )
            tree.bound.release()  # its kernel is gone and its end is told: the next child does not wait for its hooks
            if announced:
                if child.hooks.wants("SubagentStop"):
                    used = tree.usage.of(child.agent_id)
                    usage = {"input_tokens": used.input_tokens, "output_tokens": used.output_tokens,
                             "cost": float(used.cost) if used.cost is not None else None}
                    fields = {**_subagent_fields(spec, child.agent_id), "status": status,
                              "turns_used": child.turns_used, "usage": usage}
                    with contextlib.suppress(Exception):
                        await asyncio.shield(child.hooks.ask("SubagentStop", child.hook_context(), fields, emit))

    # -- task_output, task_stop, task_list ------------------------------------------------------

    def _own(self, agent_id: str) -> _Job | str:
        job = self._jobs.get(agent_id)
        if job is not None:
            return job
        if agent_id in self._tree.agents:
            return f"{agent_id} is not a background subagent that you started; you can only manage your own."
        return f"There is no subagent {agent_id!r} of yours. `task_list` lists them."

    async def _output(self, agent_id: str, wait: bool, timeout: float) -> tuple[str, bool]:
        job = self._own(agent_id)
        if isinstance(job, str):
            return job, True
        if wait and not job.finished.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.finished.wait(), timeout)
        if job.finished.is_set():
            job.told = True
            if job.note in self._notes:
                self._notes.remove(job.note)  # the model has it now: no need to tell it again
            return f"The subagent {agent_id} has ended ({job.status}). Its result:\n{job.result}", job.status != "done"
        record = self._tree.agents.get(agent_id)
        state = record.state if record else "ending"
        turns = record.agent.turns_used if record else 0
        said = job.said.strip() or "(nothing yet)"
        return (
            f"The subagent {agent_id} is still {state} ({turns} turns, {time.monotonic() - job.started_at:.0f} s). "
            f"The end of what it has said so far:\n{said}"
        ), False

    def _send(self, agent_id: str, message: str, emit: Emit) -> tuple[str, bool]:
        """`task_send`: queue the parent's message for a running background child."""
        if (problem := self.check("task_send", {"agent_id": agent_id})) is not None:
            return problem, True  # it ended while the call waited for approval
        self.running[agent_id].tell(message, f"your parent {self._parent.agent_id}")
        emit(SubagentMessage(agent_id=self._parent.agent_id, subagent_id=agent_id, text=message, sender="parent"))
        return (f"Sent to {agent_id}: it reads your message at its next step. Its answer comes as its result, or "
                "earlier if it reports."), False

    def report(self, child_id: str, text: str) -> None:
        """A running child's `task_report`: the parent's model reads it at its next model request."""
        self._notes.append(f"[The subagent {child_id} reports (it is still working):]\n{text}")

    def _stop(self, agent_id: str) -> tuple[str, bool]:
        job = self._own(agent_id)
        if isinstance(job, str):
            return job, True
        if job.finished.is_set():
            return f"The subagent {agent_id} had already ended ({job.status}).", False
        job.told = True  # what this answer says is all the model hears of it
        self._tree.cancel(agent_id, by="its parent")
        return f"The subagent {agent_id} is being stopped; you will not be told about it again.", False

    def _list(self) -> str:
        """Every child of this agent, foreground and background, running and ended, oldest first.

        Children of an earlier process of a resumed session come first, from the session's index.
        """
        earlier = [saved for saved in self._parent.saved_subagents() if saved.agent_id not in self._children]
        if not self._children and not earlier:
            return "You have started no subagents."
        lines = [
            f"{saved.agent_id} type={saved.type} earlier-session state={saved.status} turns={saved.turns} "
            f"tokens={saved.total_tokens} (can be resumed with `task(resume=...)`)"
            for saved in earlier
        ]
        for job in self._children.values():
            record = self._tree.agents.get(job.agent_id)
            state = record.state if record else (job.status or "ending")
            turns = record.agent.turns_used if record else job.turns
            elapsed = time.monotonic() - job.started_at if record else job.elapsed
            used = self._tree.usage.of(job.agent_id)
            lines.append(
                f"{job.agent_id} type={job.subagent_type} {'background' if job.background else 'foreground'} "
                f"state={state} turns={turns} "
                f"elapsed={elapsed:.0f}s tokens={used.total_tokens} model={job.model}"
                + (f" description={job.description!r}" if job.description else "")
            )
        return "\n".join(lines)

    async def close(self) -> None:
        """Stop every running child of this agent, background ones included."""
        tasks = [job.task for job in self._jobs.values() if job.task is not None and not job.task.done()]
        for task in tasks:
            task.cancel()
        children = list(self.running.values())
        await asyncio.gather(*tasks, *(c.stop() for c in children), return_exceptions=True)


def _unpriced(model: Any, own_budget: float | None, tree_budget: float | None) -> str | None:
    """Why a child on `model` cannot start under a cost budget (its price is unknown), or None."""
    if own_budget is None and tree_budget is None:
        return None
    from ..usage import model_is_priced

    if model_is_priced(model):
        return None
    name = getattr(model, "model_name", str(model))
    whose = "this call's (or its type's) `max_cost`" if own_budget is not None else "the session's cost budget"
    return (
        f"No subagent started: {whose} cannot be held, because the price of the model {name!r} is unknown "
        "(a local or scripted model, or one the price table lacks). Use `max_tokens` instead."
    )


def _finished(history: list[Any]) -> bool:
    """Whether a saved conversation ends with the agent's final answer (not cut short by a crash or a stop)."""
    from pydantic_ai.messages import ModelResponse

    if not history or not isinstance(last := history[-1], ModelResponse):
        return False
    return not any(part.part_kind == "tool-call" for part in last.parts)


def _outcome(
    child: TreeMember, answer: str, requests: list[ApprovalRequest], max_turns: int
) -> tuple[SubagentStatus, tuple[str, bool]]:
    """How a child's turn ended: its status, and the result its parent reads (and whether that is an error)."""
    if child.last_turn_rejected:
        return "rejected", (_rejected_result(child.agent_id, requests), True)
    if child.turn_limit_reached:
        budget = getattr(child, "budget_reached", None)
        if budget:
            why = f"[The subagent {child.agent_id} was stopped: {budget}.]"
        else:
            turns = f"{max_turns} turn{'s' if max_turns != 1 else ''}"
            why = f"[The subagent {child.agent_id} reached its limit of {turns}.]"
        return "turn_limit", (f"{why}\n{_without_stop_note(answer)}".strip(), True)
    if not answer.strip():
        return "done", (f"The subagent {child.agent_id} finished, but its final response was empty.", False)
    return "done", (answer, False)


def _without_stop_note(answer: str) -> str:
    """The child's last text without the `[Stopped: …]` line its own turn added (the parent's note says it once)."""
    text = answer.rstrip()
    if text.endswith("]") and "[Stopped: " in text:
        text = text[: text.rindex("[Stopped: ")]
    return text.rstrip()


def _stopped_result(child_id: str, by: str | None, said: str) -> str:
    text = f"[{(by or 'the user').capitalize()} stopped the subagent {child_id} before it finished its task.]"
    return f"{text}\nWhat it had said so far:\n{said.strip()}" if said.strip() else text


def _rejected_result(child_id: str, requests: list[ApprovalRequest]) -> str:
    """What the parent reads when the user rejected a call of its child: who, what, and that the job is unfinished."""
    rejected = [r for r in requests if r.decision is False and r.reason is None]
    described = []
    for request in rejected:
        what = f"`{request.tool_name}`"
        if request.code is not None:
            code = request.code if len(request.code) <= 300 else request.code[:300] + " …"
            what += f" with the code:\n```python\n{code}\n```"
        elif request.tool_args:
            what += f" with the arguments {json.dumps(request.tool_args)[:300]}"
        described.append(what)
    calls = "; ".join(described) if described else "one of its calls"
    return (
        f"The user rejected the subagent {child_id}'s call to {calls}. The call did not run, and the "
        f"subagent stopped without finishing its task."
    )


def _subagent_fields(spec: ChildSpec, child_id: str) -> dict[str, Any]:
    """What the `SubagentStart` and `SubagentStop` hooks are told about a child besides its context."""
    model = spec.config.model
    return {"subagent_id": child_id, "model": getattr(model, "model_name", str(model)), "prompt": spec.prompt,
            "description": spec.description, "parent_tool_use_id": spec.tool_call_id}
