"""`AgentView`: run an agent from a notebook cell and watch and approve every agent in widgets."""

from __future__ import annotations

import asyncio
import re
import sys
import threading
import uuid
from collections.abc import Callable
from typing import Any

from freeact_sub import (
    Agent,
    AgentEvent,
    ConfigError,
    ContextCompacted,
    Response,
    RunCancelled,
    ToolOutput,
)
from freeact_sub.config.agent_config import auto_approve_from_env

from . import _comm_status, _replaced
from .run_panel import RunPanel

__all__ = ["AgentView"]

_TICK = 1.0


class AgentView:
    """Widgets for an `Agent` in JupyterLab: a live panel per agent, approval buttons, a Stop button.

    In a notebook cell::

        view = AgentView(agent)
        await view.run("Plot the first 20 primes")   # the cell runs until the turn ends

    or, to get the cell back at once and let the run go on in the background::

        task = view.start("Plot the first 20 primes")

    Each run shows its own widget tree in the cell that started it. The view never blocks the
    event loop: clicks arrive while the cell awaits (this needs `ipykernel>=7.4`).

    With `auto_approve=True`, or the environment variable `FREEACT_SUB_AUTO_APPROVE=1` when
    `auto_approve` is not given, every action of every agent is approved and the output says so.

    A prompt `@explore …` runs that agent type as your own subagent of the main agent, and
    `/name args` runs your command `.freeact-sub/commands/name.md` (as in the terminal); a
    running subagent's panel has a message box whose text reaches it at its next step.

    `view` (or `display(view)`) shows the last run's panel again. When a run ends, its cell also
    keeps a static copy of the transcript, which is what a notebook reopened without a kernel
    shows. An agent that a re-run cell replaces (no name of the notebook holds it or a view of
    it any more) is stopped, and the cell says so.

    On an agent that resumed a saved session (`Agent(config, session="<id>")`), the first run
    shows the earlier turns above it, collapsed. `view.transcript(agent_id)` opens the saved
    transcript of any agent of the session, a finished subagent's say.

    If the working folder ships agent types that carry powers (hooks, endpoints, keys' names, MCP
    servers, `allow` rules, a wider sandbox) and the person has not trusted it, the first run asks
    first, with **Trust this folder** (remembered until those files change) and **Don't trust**
    (the run goes on without them); nothing starts before the answer.
    """

    def __init__(self, agent: Agent, *, auto_approve: bool | None = None) -> None:
        self.agent = agent
        self.auto_approve = auto_approve_from_env() if auto_approve is None else auto_approve
        """Whether this view approves every action of every agent."""
        self._auto_approve_cause = "AgentView(auto_approve=True)" if auto_approve else "FREEACT_SUB_AUTO_APPROVE=1"
        self.answer: str | None = None
        """The main agent's final answer of the last run that completed."""
        self.events: list[AgentEvent] = []
        """Every event of the last run, in order (subagents' events included)."""
        self.panel: RunPanel | None = None
        """The widget tree of the last run."""
        self.compaction: ContextCompacted | None = None
        """The last `compact()`'s event (None before one, or when there was nothing to compact)."""
        self._task: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._static_id: str | None = None
        self._static: dict[str, str] | None = None
        self._earlier_shown = False
        self._trust_wait: asyncio.Future[bool] | None = None
        _replaced.watch()
        _comm_status.install()

    def __repr__(self) -> str:
        state = self.panel.state if self.panel is not None else "no run yet"
        return f"<AgentView of {self.agent.agent_id}: {state}>"

    def _ipython_display_(self) -> None:
        """`view` as a cell's value, or `display(view)`: the last run's panel (and its static copy)."""
        from IPython.display import display

        if self.panel is None:
            earlier = self.earlier_turns()
            display(earlier if earlier is not None else {"text/plain": repr(self)}, raw=earlier is None)
            return
        display(self.panel)
        display(self._static_bundle(), raw=True, display_id=self._static_id)

    def _static_bundle(self) -> dict[str, Any]:
        # Until the run ends, an empty placeholder whose display id the end of the run updates.
        return self._static or {"text/plain": "", "text/html": ""}

    @property
    def running(self) -> bool:
        """Whether a run of this view is in progress."""
        return self._task is not None and not self._task.done()

    async def run(self, prompt: str, *, max_turns: int | None = None) -> None:
        """Run one turn of the agent, showing it in this cell; returns when the turn ends.

        The final answer is in `view.answer` afterwards. A failing model request is shown in the
        main agent's panel and raised. Raises `RuntimeError` at once in a kernel that cannot
        deliver a click while a cell awaits (ipykernel older than 7.4), unless nothing needs a click.
        """
        if not (self.auto_approve or self.agent.approvals.everything) and (old := _old_ipykernel()):
            raise RuntimeError(
                f"ipykernel {old} holds button clicks until the running cell ends, so approvals could never "
                "arrive while `await view.run(...)` waits. Install ipykernel>=7.4 in the notebook's environment "
                "and restart the kernel, or use `view.start(...)`, which returns from the cell at once."
            )
        with _comm_status.cell_awaits():  # JupyterLab shows the kernel busy until the run ends
            task = self.start(prompt, max_turns=max_turns)
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # the cell itself was interrupted
                # Stop while the agent started: the run's panel says cancelled; the cell ends without a traceback

    async def compact(self, focus: str | None = None) -> None:
        """Compact the agent's history now, between runs (as `/compact [focus]` in the terminal), and show it in
        this cell: the tokens before and after, and the summary the model wrote (folded). Says so when there was
        nothing to compact (or a `PreCompact` hook said no). The event itself is `view.compaction`."""
        if self.running:
            raise RuntimeError("this view is running a turn; compact after it")
        from IPython.display import display

        from ._html import compaction_bundle

        event = await self.agent.compact(focus)
        self.compaction = event
        if event is None:
            display({"text/plain": "Nothing to compact (or a PreCompact hook said no)."}, raw=True)
        else:
            display(compaction_bundle(event), raw=True)

    def start(self, prompt: str, *, max_turns: int | None = None) -> asyncio.Task[None]:
        """Show the run in this cell and run it as a background task; returns the task at once."""
        if self.running:
            raise RuntimeError("this view is already running a turn; wait for it or call view.stop()")
        from IPython.display import display

        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        note = self._auto_approve_note()
        if self.auto_approve:
            self.agent.approvals.always_all()
            if not _in_ipython():  # in a notebook the run's banner says so; a printed line would say it twice
                print(note)
        panel = RunPanel(
            self.agent.agent_id,
            prompt,
            policy=self.agent.approvals,
            on_stop=self.stop,
            auto_approve_note=note,
            on_stop_agent=lambda agent_id: self._in_loop(lambda: self.agent.cancel_subagent(agent_id)),
            on_send=self._send,
        )
        self.panel = panel
        self.events = []
        self._static = None
        self._static_id = f"freeact-static-{uuid.uuid4().hex}"
        if not self._earlier_shown:
            self._earlier_shown = True
            if (earlier := self.earlier_turns()) is not None:
                display(earlier)
        display(panel)
        if _in_ipython():
            display(self._static_bundle(), raw=True, display_id=self._static_id)
        task = asyncio.create_task(self._drive(panel, prompt, max_turns), name=f"view:{self.agent.agent_id}")
        task.add_done_callback(_retrieve)
        self._task = task
        return task

    def _auto_approve_note(self) -> str | None:
        """The banner's words when approving everything is on before the run starts, naming what turned it on; None
        when it is off or the header's **Approve all agents** did it (the run's panel says that itself)."""
        if self.auto_approve:
            cause = self._auto_approve_cause
        elif self.agent.config.auto_approve and self.agent.approvals.everything:
            cause = "the agent's config: auto_approve"
        else:
            return None
        return f"Auto-approve is on ({cause}): every action of every agent runs without asking."

    def earlier_turns(self) -> Any:
        """The agent's saved turns (collapsed), or None if its session has none yet or it saves no session."""
        saved = self._saved_session()
        if saved is None:
            return None
        from .saved import earlier_turns

        return earlier_turns(saved, self.agent.agent_id)

    def transcript(self, agent_id: str | None = None) -> Any:
        """The saved transcript of an agent of this agent's session (default: the main agent), as panels."""
        saved = self._saved_session()
        if saved is None:
            raise RuntimeError(f"{self.agent.agent_id} saves no session (AgentConfig.save_sessions is off)")
        from .saved import transcript_panel

        return transcript_panel(saved, agent_id)

    def _saved_session(self) -> Any:
        from freeact_sub import SessionError
        from freeact_sub.sessions import open_session

        if self.agent.session_id is None:
            return None
        try:
            saved = open_session(self.agent.session_id, self.agent.config.working_dir)
        except SessionError:
            return None
        return saved if saved.summary.main_id is not None else None

    def stop(self) -> None:
        """Cancel the running turn: its subagents stop and their kernels shut down."""
        panel = self.panel
        if panel is not None and self.running:
            self._in_loop(lambda: panel.set_status("stopping"))
        if (waiting := self._trust_wait) is not None:
            self._in_loop(waiting.cancel)
        if (task := self._task) is not None and not task.done() and not self.agent.started:
            self._in_loop(task.cancel)  # a start in progress has no turn to cancel yet: it stops what it started
        self._in_loop(self.agent.cancel)

    def _send(self, agent_id: str, text: str) -> str | None:
        """A subagent panel's message box: the person's message to it; returns why it was not sent, or None."""
        if self._loop is not None and threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self.agent.send, agent_id, text)
            return None
        try:
            self.agent.send(agent_id, text)
        except ValueError as exc:
            return str(exc)
        return None

    def _in_loop(self, action: Callable[[], object]) -> None:
        # Widget callbacks run on the kernel's loop thread in ipykernel 7.4; be safe if one does not.
        if self._loop is None or threading.get_ident() == self._loop_thread:
            action()
        else:
            self._loop.call_soon_threadsafe(action)

    async def _drive(self, panel: RunPanel, prompt: str, max_turns: int | None) -> None:
        ticker = asyncio.create_task(_tick(panel))
        state = "done"
        try:
            if not self.agent.started:
                await self._settle_trust(panel)
                panel.start_step("starting the agent")
                await self.agent.start(progress=panel.start_step)
                panel.start_step("")
                files = self.agent.tree.prompt_files
                panel.show_files([str(file.path) for file in files.instructions],
                                 {name: skill.description for name, skill in files.skills.items()},
                                 list(files.left_out))
            panel.main.set_sandbox(self.agent.sandbox.name, self.agent.sandbox.note or self.agent.sandbox.detail())
            panel.set_status("running")
            prompt, agent_type, model = self.agent.read_prompt(prompt)
            stream = self.agent.stream(prompt, max_turns=max_turns, agent_type=agent_type, model=model)
            try:
                async for event in stream:
                    self.events.append(event)
                    if isinstance(event, RunCancelled) and event.agent_id == self.agent.agent_id:
                        state = "cancelled"
                    elif isinstance(event, Response) and event.final and event.agent_id == self.agent.agent_id:
                        self.answer = event.content
                    elif agent_type is not None and isinstance(event, ToolOutput) and (
                            event.agent_id == self.agent.agent_id):
                        self.answer = event.content  # a directed run's answer is its subagent's
                    panel.handle(event)
            finally:
                await stream.aclose()
        except asyncio.CancelledError:
            panel.end("cancelled")
            raise
        except Exception as exc:
            panel.end("failed", error=f"{type(exc).__name__}: {exc}")
            raise
        else:
            background = frozenset(info.agent_id for info in self.agent.subagents())
            panel.end("cancelled" if state == "cancelled" else "done", still_running=background)
            if background:
                self._watch_background(panel)
        finally:
            ticker.cancel()
            self._keep_static_copy(panel)

    async def _settle_trust(self, panel: RunPanel) -> None:
        """Ask whether to trust the working folder if its powerful agent types wait for it; nothing starts before."""
        project = self.agent.untrusted_project()
        if project is None:
            return
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def decide(trusted: bool) -> None:
            self._in_loop(lambda: None if answer.done() else answer.set_result(trusted))

        question = panel.ask_trust(project, decide)
        self._trust_wait = answer
        try:
            trusted = await answer
        finally:
            self._trust_wait = None
        if not trusted:
            self.agent.trust_project = False
            names = project.names()
            question.settle(f"Not trusted: {names} not used in this run (everything else works).")
            return
        try:
            where = project.remember()
        except (OSError, ConfigError) as exc:
            self.agent.trust_project = True
            question.settle(f"Trusted for this run only (could not remember it: {exc}).")
            return
        question.settle(f"Trusted. Remembered in {where}; you are asked again when these files change.")

    def _watch_background(self, panel: RunPanel) -> None:
        """Keep the run's panel live after the cell returned: background subagents' events (and their approval
        buttons) land in it between turns, until the next run of this view or the agent stops."""
        if self._watcher is not None and not self._watcher.done():
            self._watcher.cancel()

        async def watch() -> None:
            ticker = asyncio.create_task(_tick(panel))
            try:
                async for event in self.agent.background_events():
                    (self.panel or panel).handle(event)
            finally:
                ticker.cancel()

        self._watcher = asyncio.create_task(watch(), name="agent-view-background")
        self._watcher.add_done_callback(_retrieve)

    def _keep_static_copy(self, panel: RunPanel) -> None:
        """Put the finished run's transcript, as static HTML, into the cell(s) showing the run."""
        if panel is not self.panel or self._static_id is None or not _in_ipython():
            return
        from IPython.display import update_display

        self._static = {"text/html": panel.static_html(), "text/plain": panel.static_text()}
        update_display(self._static, raw=True, display_id=self._static_id)


def _in_ipython() -> bool:
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.initialized()


def _old_ipykernel() -> str | None:
    """The version of the ipykernel running this code if it is older than 7.4, else None."""
    kernel = sys.modules.get("ipykernel")
    version = getattr(kernel, "__version__", None)
    if not isinstance(version, str):
        return None  # not in an IPython kernel (a script, a test): nothing to deliver clicks anyway
    numbers = [int(part) for part in re.findall(r"\d+", version)[:2]]
    return version if tuple(numbers) < (7, 4) else None


async def _tick(panel: RunPanel) -> None:
    while True:
        await asyncio.sleep(_TICK)
        panel.tick()


def _retrieve(task: asyncio.Task[None]) -> None:
    # The error is shown in the panel (and raised by `run()`); a background run must not also log it as unretrieved.
    if not task.cancelled():
        task.exception()
