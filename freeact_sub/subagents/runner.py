"""The `task` tool: run a child agent for an isolated job and return only its final answer.

A child has its parent's model, model settings, system prompt and MCP configuration, but a
fresh kernel (from the tree's pool), new MCP connections, its own id and no `task` tool. At
most `max_subagents` children exist at once in the tree: the bound is taken before the child's
kernel is acquired. Every event of the child flows into the parent's stream tagged with the
child's id; `SubagentStarted` / `SubagentFinished` (tagged with the parent's id) frame its life.
Whatever happens in the child (done, failed, cancelled, turn limit) it is stopped at once when
it ends. Children are built and registered by the `AgentTree`; this package never needs `Agent`. `TaskChecks` says
whether a call can work, `drive` runs one child, `Jobs` keeps the children and answers about them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..config.agent_types import GENERAL, configure, confine
from ..errors import ConfigError
from ..events import AgentEvent, Emit, Response, SubagentMessage, SubagentReport
from ..kernels.backends import uses_local_kernels
from ..models.options import model_label
from ..tools.names import tool_allowed
from ..tree.registry import AgentTree, ChildSpec, TreeMember
from .change_sets import open_workspace
from .checks import TaskChecks
from .drive import drive
from .jobs import Job, Jobs
from .results import FORK_NOTE, RESUME_INTERRUPTED_NOTE, RESUME_NOTE, ended_cleanly, stopped_result, unpriced

__all__ = ["DEFAULT_MAX_TURNS", "SubagentRunner"]

DEFAULT_MAX_TURNS = 10
"""A child's turn limit when neither the `task` call nor its agent type sets one."""

_TAIL_CHARS = 1500


class SubagentRunner:
    """Starts the children of one agent through its tree (in the foreground or the background, new, resumed or
    forked) and answers the `task` family's calls."""

    def __init__(self, tree: AgentTree, parent: TreeMember) -> None:
        self._tree = tree
        self._parent = parent
        self.jobs = Jobs(tree, parent)
        """Its children, running and ended, and the notes on them its model has not been told yet."""
        self.checks = TaskChecks(self.jobs)

    def take_notes(self) -> list[str]:
        """The notes on background children that ended since the model was last told (each handed out once)."""
        return self.jobs.take_notes()

    def put_back(self, notes: list[str]) -> None:
        """Notes whose model request failed: told at the next one instead."""
        self.jobs.put_back(notes)

    def announce(self, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
        """Tell the tree of a response's `task` calls `(call id, arguments)` that will start a child running code
        under this agent's profile, the tree's main pool's (new or resumed, not kernel-less or under a profile of
        its type's own): their kernels boot while the calls wait for approval (an isolated child's in a
        copy-on-write view of its own). Returns the ids announced, for `withdraw` once the calls have run."""
        tree, parent = self._tree, self._parent
        if parent.sandbox != tree.sandbox:
            return []
        announced, isolated = [], []
        for call_id, arguments in calls:
            name = arguments.get("subagent_type") or GENERAL
            definition = tree.agent_types.get(name) if isinstance(name, str) else None
            if definition is None or definition.sandbox is not None:
                continue
            if tool_allowed("execute_ipython_cell", definition.tools, definition.disallowed_tools):
                announced.append(call_id)
                if (arguments.get("isolation") or definition.isolation) == "copy-on-write":
                    isolated.append(call_id)  # its kernel boots in a view of its own
        if announced:
            tree.announce(parent.agent_id, announced, isolated=isolated)
        return announced

    def withdraw(self, call_ids: list[str]) -> None:
        """The calls `announce` named have run, or will not: those that started no child are expected no more."""
        if call_ids:
            self._tree.withdraw(self._parent.agent_id, call_ids)

    def check(self, name: str, arguments: dict[str, Any]) -> str | None:
        """Why a call of the `task` family cannot work, before anyone is asked to approve it; None if it can."""
        return self.checks.check(name, arguments)

    async def call(self, name: str, arguments: dict[str, Any], tool_call_id: str, emit: Emit) -> tuple[str, bool]:
        """Run a call of the `task` family; returns its result and whether it is an error."""
        if name == "task_output":
            return await self.jobs.output(arguments["agent_id"], arguments["wait"], arguments["timeout"])
        if name == "task_stop":
            return self.jobs.stop(arguments["agent_id"])
        if name == "task_list":
            return self.jobs.listing(), False
        if name == "task_send":
            return self._send(arguments["agent_id"], arguments["message"], emit)
        return await self.run(
            tool_call_id, arguments["prompt"], arguments.get("max_turns"), emit,
            background=arguments.get("run_in_background", False), resume=arguments.get("resume"),
            fork=arguments.get("fork", False), max_tokens=arguments.get("max_tokens"),
            max_tool_calls=arguments.get("max_tool_calls"), max_cost=arguments.get("max_cost"),
            agent_type=arguments.get("subagent_type") or GENERAL,
            description=" ".join(str(arguments.get("description") or "").split()), model=arguments.get("model"),
            isolation=arguments.get("isolation"),
        )

    async def run(
        self, tool_call_id: str, prompt: str, max_turns: int | None, emit: Emit, *, background: bool = False,
        resume: str | None = None, fork: bool = False, max_tokens: int | None = None,
        max_tool_calls: int | None = None, agent_type: str = GENERAL, description: str = "",
        max_cost: float | None = None, model: str | None = None, isolation: str | None = None,
    ) -> tuple[str, bool]:
        """Run one child to its end (or start it in the background); returns the `task` call's result and
        whether it is an error.

        The result is an error when the child failed, stopped at its turn limit or a budget, was
        stopped, or stopped because the user rejected one of its calls: the parent model should
        not take it for a finished job. `model` names one of the models the type allows; a resumed
        child keeps the model it had unless `model` names another. `isolation` (default: the type's, else
        `shared`): `copy-on-write` runs it in a workspace of its own, whose change set is decided when it ends.
        """
        parent, tree = self._parent, self._tree
        arguments = {"prompt": prompt, "subagent_type": agent_type, "resume": resume, "fork": fork}
        if model is not None:
            arguments["model"] = model
        # checked before it was approved; again now, as calls of one response may have taken what it counted on
        if (problem := self.checks.check("task", arguments)) is not None:
            return problem, True
        if resume is not None and agent_type == GENERAL:  # a resumed child keeps its type
            agent_type = self.checks.resumed_type(resume)
        definition = tree.agent_types[agent_type]
        picked = self.checks.pick_model(agent_type, model) if model is not None else None
        if isinstance(picked, str):
            return picked, True
        if picked is None and resume is not None:  # a resumed child keeps its model
            picked = self.checks.resumed_model(resume, agent_type)
        turns = max_turns or definition.max_turns or DEFAULT_MAX_TURNS
        if not background and tree.slot_never_frees(parent.agent_id):
            slots = tree.config.max_subagents
            return (
                f"No subagent started: all {slots} subagent slot{'s' if slots != 1 else ''} (max_subagents={slots}) "
                f"are held by subagents that each wait for a subagent of their own, so none could ever become free "
                f"for this one. Do this job yourself."
            ), True
        try:
            config = configure(parent.settings, definition, agent_type, model=parent.model, choice=picked)
            config = config.model_copy(update={"model": tree.supplies.resolve_model(config)})
            sandbox, definition = confine(parent.sandbox, definition, agent_type, config)
        except ConfigError as exc:
            return f"The agent type {agent_type!r} cannot start: {exc}", True
        max_cost = max_cost if max_cost is not None else definition.max_cost
        if (refusal := unpriced(config.model, max_cost, tree.config.max_cost)) is not None:
            return refusal, True
        workspace = None
        if (isolation or definition.isolation or "shared") == "copy-on-write" and definition.needs_kernel:
            opened = await asyncio.to_thread(
                open_workspace, config.working_dir, enforced=sandbox.enforced, local=uses_local_kernels(config),
                copy=tree.config.isolation_copy, copy_limit=tree.config.isolation_copy_limit)
            if isinstance(opened, str):
                return f"The subagent did not start: {opened}", True
            workspace = opened
            config = config.model_copy(update={"enable_subagents": False})  # its children would write the folder
        if resume is None:
            self.jobs.started_children += 1
        spec = ChildSpec(config=config, parent_id=parent.agent_id, tool_call_id=tool_call_id, prompt=prompt,
                         agent_type=agent_type, definition=definition, description=description,
                         max_tokens=max_tokens, max_tool_calls=max_tool_calls, max_cost=max_cost, sandbox=sandbox,
                         workspace=workspace)
        if resume is not None:
            ended = self.jobs.ended.pop(resume, None)
            live = resume in self.jobs.running
            # a child of an earlier process (the session was resumed) is found in the saved session
            history = ended.history if ended is not None else None if live else parent.conversation.saved_child(resume)
            if history is None:
                why = "it is still running" if live else "it is not a subagent of yours that has finished"
                return f"Cannot resume {resume!r}: {why}.", True
            note = RESUME_NOTE if ended_cleanly(history) else RESUME_INTERRUPTED_NOTE
            spec = replace(spec, agent_id=resume, history=history, note=note)
        elif fork:
            history = parent.history[:-1]  # up to this call: the response that makes it has no results yet
            spec = replace(spec, history=history, note=FORK_NOTE.format(parent=parent.agent_id))
        child = tree.new_child(spec)
        record = tree.agents[child.agent_id]
        if workspace is not None:
            workspace.agent_id = child.agent_id
            tree.workspaces[child.agent_id] = workspace
        job = Job(child.agent_id, spec.description, spec.agent_type, time.monotonic(), background=background,
                   model=model_label(config.model))
        self.jobs.children.pop(child.agent_id, None)  # a resumed child is listed once, as its latest run
        self.jobs.children[child.agent_id] = job
        if not background:
            record.task = asyncio.create_task(drive(self.jobs, child, spec, turns, emit, job=job),
                                              name=f"task:{child.agent_id}")
            try:
                return await record.task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # the parent's turn is cancelled
                return stopped_result(child.agent_id, record.stopped_by, ""), True
        record.background = True
        self.jobs.background[child.agent_id] = job
        job.task = record.task = asyncio.create_task(self._in_background(child, spec, turns, job),
                                                     name=f"background-task:{child.agent_id}")
        return (
            f"Started the subagent {child.agent_id} in the background. You will be told when it finishes; "
            f"`task_output(agent_id=\"{child.agent_id}\")` gives its state or result, `task_stop` stops it."
        ), False

    async def _in_background(self, child: TreeMember, spec: ChildSpec, max_turns: int, job: Job) -> None:
        record = self._tree.agents.get(child.agent_id)

        def emit(event: AgentEvent) -> None:
            if isinstance(event, Response) and event.agent_id == child.agent_id and event.content:
                job.said = (job.said + "\n" + event.content)[-_TAIL_CHARS:]
            self._tree.background.emit(event)

        try:
            await drive(self.jobs, child, spec, max_turns, emit, job=job)
        except asyncio.CancelledError:
            if record is None or record.stopped_by is None:
                raise  # the parent is stopping

    def _send(self, agent_id: str, message: str, emit: Emit) -> tuple[str, bool]:
        """`task_send`: queue the parent's message for a running background child."""
        if (problem := self.check("task_send", {"agent_id": agent_id})) is not None:
            return problem, True  # it ended while the call waited for approval
        self.jobs.running[agent_id].inbox.tell(message, f"your parent {self._parent.agent_id}")
        emit(SubagentMessage(agent_id=self._parent.agent_id, subagent_id=agent_id, content=message, sender="parent"))
        return (f"Sent to {agent_id}: it reads your message at its next step. Its answer comes as its result, or "
                "earlier if it reports."), False

    def report(self, child_id: str, text: str) -> None:
        """A running child's `task_report`: the parent's model reads it at its next model request."""
        self.jobs.notes.append(f"[The subagent {child_id} reports (it is still working):]\n{text}")

    def reporter(self, child_id: str) -> Callable[[str, Emit], None]:
        """The `task_report` of the child `child_id`: to this agent's next model request, and a `SubagentReport`."""

        def report(text: str, emit: Emit) -> None:
            self.report(child_id, text)
            emit(SubagentReport(agent_id=child_id, parent_id=self._parent.agent_id, content=text))

        return report

    async def close(self) -> None:
        """Stop every running child of this agent, background ones included."""
        tasks = [job.task for job in self.jobs.background.values() if job.task is not None and not job.task.done()]
        for task in tasks:
            task.cancel()
        children = list(self.jobs.running.values())
        await asyncio.gather(*tasks, *(c.stop() for c in children), return_exceptions=True)
