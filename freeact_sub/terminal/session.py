"""One terminal session: run turns, render their events, ask approvals, cancel on Ctrl-C.

During a turn two tasks share the event loop: this one consumes `Agent.stream()` and renders
each event; the approval desk takes the person's keys and decides the waiting questions, in
whatever order the person picks. A live view at the bottom of the screen shows text still
streaming, the subagents' status and the waiting questions. The desk belongs to the session,
not to a turn, so it can also take requests that arrive between turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from freeact_sub import (
    Agent,
    ApprovalRequest,
    ContextCompacted,
    FreeactError,
    Response,
    RunCancelled,
    TimelineBuilder,
    ToolOutput,
)
from freeact_sub.launch.modes import MODES, initial_mode, mode_help

from .approvals import ApprovalDesk
from .built_in_commands import BUILT_IN_COMMANDS
from .early_prompt import EarlyPrompt
from .input_text import first_undecodable, replace_undecodable
from .keys import KeyReader
from .palette import Palette
from .prompt import PromptReader
from .render import Renderer
from .rewind_cmd import rewind_command
from .safe_text import clean
from .skills_view import read_files_line, skills_view
from .status import SubagentBoard, agents_table
from .theme import Theme

__all__ = ["Session", "TurnOutcome"]

TurnStatus = Literal["done", "cancelled", "failed", "rejected", "turn_limit"]


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn ended and the main agent's final answer."""

    status: TurnStatus
    answer: str | None = None
    error: str | None = None


class Session:
    """Runs turns of one started agent in the terminal."""

    def __init__(
        self, agent: Agent, console: Console, *, ask_keys: bool, show_final: bool = True, theme: Theme | None = None
    ) -> None:
        """`theme`: the colours for the terminal's background (`theme.py`); default dark."""
        self.agent = agent
        self.console = console
        if theme is not None:
            theme.apply(console)
        self.palette = Palette({name: definition.color for name, definition in agent.tree.agent_types.items()}, theme)
        self.palette.use_type_colour(agent.agent_id, agent.agent_type)  # `--agent TYPE`: that type's colour
        self.palette.colour(agent.agent_id)  # else the main agent gets the first colour
        self.board = SubagentBoard(self.palette)
        self.renderer = Renderer(console, self.palette, self.board, main_id=agent.agent_id, show_final=show_final)
        self._ask_keys = ask_keys
        self.desk = ApprovalDesk(self.renderer, self.palette, agent.approvals, stop=agent.cancel_subagent)
        self.desk.on_line = self._typed_during_turn
        self.mode = initial_mode(agent)
        """`/mode`: how calls are approved and the type a prompt runs as."""
        self._cancelling = False
        self._spinner = Spinner("dots", style="dim")
        self._turn_started = 0.0
        self.timeline: TimelineBuilder | None = None
        self._compactions: list[ContextCompacted] = []
        """Set to collect the turns' events for a timeline (`-p … --timeline FILE`)."""

    async def run_turn(self, prompt: str) -> TurnOutcome:
        """Run one turn to its end (answered, rejected, cancelled with Ctrl-C, or failed).

        A line `@type …` runs that agent type as the person's own subagent, `/name …` the person's command.
        """
        main = self.agent.agent_id
        try:
            prompt, agent_type, model = self.agent.read_prompt(prompt, reserved=BUILT_IN_COMMANDS)
        except FreeactError as exc:  # a bad command file
            return TurnOutcome("failed", error=str(exc))
        agent_type = self.mode.turn_type(agent_type)
        keys = KeyReader() if self._ask_keys else None
        desk = self.desk
        self.board.clear()
        self.board.carry_over(self.agent.subagents())  # background subagents from earlier turns hold slots too
        self.renderer.reset()
        self._cancelling = False
        self._turn_started = time.monotonic()
        answer: str | None = None
        directed_answer: str | None = None
        status: TurnStatus = "done"
        error: str | None = None
        with contextlib.ExitStack() as stack:
            if keys is not None:
                stack.enter_context(keys)
            stack.enter_context(self._ctrl_c_cancels())
            stack.enter_context(self._live(desk))
            asker = asyncio.create_task(desk.run(keys), name="approvals")
            asker.add_done_callback(self._desk_ended)
            try:
                async for event in self.agent.stream(prompt, agent_type=agent_type, model=model):
                    self.renderer.handle(event)
                    if self.timeline is not None:
                        self.timeline.add(event)
                    if isinstance(event, ApprovalRequest) and not event.decided:
                        desk.submit(event)
                    elif isinstance(event, Response) and event.final and event.agent_id == main:
                        answer = event.content
                    elif isinstance(event, ToolOutput) and event.agent_id == main and agent_type is not None:
                        directed_answer = event.content  # a directed turn's answer is its subagent's
                    elif isinstance(event, RunCancelled) and event.agent_id == main:
                        status = "cancelled"
            except (FreeactError, ValueError) as exc:  # the model request failed, or a directed turn could not start
                status, error = "failed", str(exc)
            finally:
                asker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asker  # re-raises a crash of the desk
        if status == "done" and self.agent.turns.last_turn_rejected:
            status = "rejected"
        elif status == "done" and self.agent.turns.turn_limit_reached:
            status = "turn_limit"
        return TurnOutcome(status, answer if answer is not None else directed_answer, error)

    async def interactive(self, reader: PromptReader, early: EarlyPrompt | None = None) -> None:
        """Read prompts and run turns until the person exits (Ctrl-D, or Ctrl-C at an empty prompt).

        Between turns, background subagents' events are printed above the prompt as they come, and
        their questions wait on the desk: `/y` or `/n [reason]` answers the oldest, `/s` stops the
        subagent that asks it (the next turn's keys can too). `/agents` lists the live subagents,
        `/stop ID` stops one. `early`: the prompt that was up while the agent started; its line is the first.
        """
        watcher = asyncio.create_task(self._watch_background(), name="background-events")
        try:
            await self._prompts(reader, early)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _prompts(self, reader: PromptReader, early: EarlyPrompt | None) -> None:
        from prompt_toolkit.patch_stdout import patch_stdout

        while True:
            try:
                with patch_stdout(raw=True):  # what background subagents print goes above the prompt line
                    prompt = await (early.first() if early is not None else reader.read())
                    early = None
            except (EOFError, KeyboardInterrupt):
                return
            if not prompt.strip():
                continue
            if first_undecodable(prompt) is not None:
                prompt = replace_undecodable(prompt)
                self.renderer.note("Your text held bytes that are not UTF-8; they are sent as �.", style="yellow")
            if prompt.strip().partition(" ")[0] == "/compact":
                await self.compact(prompt.strip().partition(" ")[2].strip() or None)
                continue
            if prompt.strip().partition(" ")[0] == "/rewind":
                await rewind_command(self.agent, self.renderer, prompt.strip().partition(" ")[2])
                continue
            if self.command(prompt.strip()):
                continue
            self.after_turn(await self.run_turn(prompt))

    async def compact(self, focus: str | None) -> None:
        """`/compact [focus]`: the main agent's older rounds become a summary now (on `focus`, if given)."""
        self.renderer.note("Compacting the conversation…", style="dim")
        try:
            event = await self.agent.compact(focus)
        except (FreeactError, RuntimeError) as exc:
            self.renderer.note("Not compacted:", style="red", detail=str(exc))
            return
        if event is None:
            self.renderer.note("Nothing to compact (or a PreCompact hook said no).", style="dim")
        else:
            self._show_once(event)

    def _show_once(self, event: ContextCompacted) -> None:
        """A `/compact` comes back twice, as the call's result and as a background event: show it once."""
        if any(shown is event for shown in self._compactions):
            return
        self._compactions = [*self._compactions[-3:], event]
        self.renderer.handle(event)

    def after_turn(self, outcome: TurnOutcome) -> None:
        """Say how the turn ended, and ask again the questions of background subagents that it left open."""
        if outcome.status == "failed":
            self.renderer.note("The turn failed:", style="red", detail=outcome.error or "")
        elif outcome.status == "cancelled":
            self.renderer.note(
                "Cancelled. The conversation keeps this prompt and what finished; the model is told that "
                "the rest was interrupted (with the output a running cell had printed).", style="yellow",
            )
        for request in self.desk.pending:  # a background subagent's question the turn left open: ask again here
            self.renderer.show_request(request)
            self._tell_how_to_answer(request)
        self.console.print()

    # -- between turns --------------------------------------------------------------------

    async def _watch_background(self) -> None:
        """Show background subagents' events while no turn runs; hand their questions to the desk."""
        async for event in self.agent.background_events():
            if isinstance(event, ContextCompacted):
                self._show_once(event)
                continue
            self.renderer.handle(event)
            if isinstance(event, ApprovalRequest) and not event.decided:
                self.desk.submit(event)
                self._tell_how_to_answer(event)

    def _tell_how_to_answer(self, request: ApprovalRequest) -> None:
        """Between turns a question is answered at the prompt: say how."""
        self.renderer.note(
            f"{request.agent_id} waits for your answer: /y approves, /n [reason] rejects, /s stops it "
            f"({self.desk.waiting} waiting)", style="yellow",
        )

    def command(self, line: str) -> bool:
        """Run a slash command typed at the prompt; False if the line is a prompt for the model."""
        name, _, rest = line.partition(" ")
        if name == "/agents":
            from .banner import agent_types_table

            self.console.print(agents_table(self.agent.subagents(), self.palette))
            self.console.print(agent_types_table(self.agent))
        elif name == "/batch":
            self.console.print(self.renderer.batches.table(rest.strip(), self.console.width))
        elif name == "/mode":
            self._switch_mode(rest.strip())
        elif name == "/skills":
            self.console.print(skills_view(self.agent))
        elif name == "/stop":
            target = rest.strip()
            if not target:
                self.renderer.note("usage: /stop AGENT-ID (see /agents)", style="yellow")
            elif self.agent.cancel_subagent(target):
                self.renderer.note(f"Stopping {target}.", style="yellow")
            else:
                self.renderer.note(f"No running subagent {target!r} (see /agents).", style="yellow")
        elif name == "/send":
            target, _, text = rest.strip().partition(" ")
            if not target or not text.strip():
                self.renderer.note("usage: /send AGENT-ID TEXT (see /agents)", style="yellow")
                return True
            try:
                self.agent.send(target, text.strip())
            except ValueError as exc:
                self.renderer.note("Not sent:", style="yellow", detail=f"{exc}.")
            else:
                self.renderer.note(f"Sent to {target}: it reads it at its next step.", style="dim")
        elif name in ("/y", "/n", "/s"):
            if self.desk.selected is None:
                self.renderer.note("No question is waiting.", style="dim")
                return True
            self.desk.press(name[1])
            if name == "/n":
                for key in rest.strip():
                    self.desk.press(key)
                self.desk.press("\r")
        elif name == "/help" or (name.startswith("/") and "/" not in name[1:] and len(name) > 1):
            # a path such as /etc/hosts is a prompt; /word is a command, and an unknown one goes nowhere
            files = self.agent.command_files()
            if name != "/help" and (name[1:] in files.commands or name[1:] in files.problems):
                return False  # the person's command: `run_turn` runs it (or says what is wrong with its file)
            if name != "/help":
                self.renderer.note(f"Unknown command {name}: nothing was sent to the model.", style="yellow")
            self._help(files.commands)
            if files.problems:
                self.renderer.note("These command files are left out:", style="red",
                                   detail="\n".join(files.problems[n] for n in sorted(files.problems)))
        else:
            return False
        return True

    def _switch_mode(self, name: str) -> None:
        if name not in MODES:
            style = "yellow" if name else "dim"
            self.renderer.note((f"No mode {name!r}. " if name else "") + mode_help(self.mode), style=style)
            return
        self.mode = MODES[name]
        self.mode.apply(self.agent)
        self.renderer.note(f"Mode: {self.mode.name}. {self.mode.description}", style="bold")

    def _help(self, commands: dict[str, Any]) -> None:
        lines = [f"{usage}: {what}" for usage, what in BUILT_IN_COMMANDS.values()]
        types = ", ".join(self.agent.tree.agent_types)
        lines.append(f"@TYPE PROMPT: run an agent type as your own subagent ({types})")
        for name, command in sorted(commands.items()):
            hidden = " (hidden by the built-in)" if f"/{name}" in BUILT_IN_COMMANDS else ""
            agent = f" [as @{command.agent}]" if command.agent else ""
            about = " ".join(clean(command.description or "(no description)").split())
            lines.append(f"/{name}{agent}: {about}{hidden}")
        if not commands:
            lines.append("Your own commands: none (add .freeact-sub/commands/NAME.md)")
        self.renderer.note("Commands:\n  " + "\n  ".join(lines) + "\nCtrl-D or Ctrl-C at an empty prompt exits.\n"
                           + read_files_line(self.agent), style="dim")

    # -- during a turn --------------------------------------------------------------------

    def _typed_during_turn(self, line: str) -> None:
        """A line typed while the turn runs: `/agents` and `/batch` are shown at once; anything else is said to wait."""
        name, _, rest = line.partition(" ")
        if name in ("/agents", "/batch"):
            shown = self.renderer.batches.table(rest.strip(), self.console.width) if name == "/batch" else None
            self.console.print(shown or agents_table(self.agent.subagents(), self.palette))
            self.renderer.refresh()
        else:
            self.renderer.note(f"A turn is running: {line[:40]!r} was not sent. While it runs, /agents lists the "
                               "subagents, /batch a batch's rows, and Ctrl-C cancels; type your prompt when "
                               "the turn has ended.",
                               style="yellow")

    def _desk_ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.agent.cancel()  # the desk ends on its own only if it crashed: stop the turn, then re-raise

    @contextlib.contextmanager
    def _ctrl_c_cancels(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()

        def on_sigint(signum: int, frame: Any) -> None:
            loop.call_soon_threadsafe(self._cancel)

        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _cancel(self) -> None:
        if self._cancelling:
            return
        self._cancelling = True
        self.renderer.note("Cancelling: stopping the model, interrupting kernels, stopping subagents …", style="yellow")
        self.agent.cancel()

    @contextlib.contextmanager
    def _live(self, desk: ApprovalDesk) -> Iterator[None]:
        if not self.console.is_terminal:
            yield
            return
        live = Live(
            console=self.console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
            get_renderable=lambda: self._view(desk),
        )

        async def tick() -> None:
            while True:
                live.refresh()
                await asyncio.sleep(0.1)

        with live:
            ticker = asyncio.create_task(tick(), name="live-view")
            # after a line is printed for good, redraw the view at once, or it shows stale partials until the next tick
            self.renderer.after_print = live.refresh
            try:
                yield
            finally:
                self.renderer.after_print = None
                ticker.cancel()

    def _view(self, desk: ApprovalDesk) -> RenderableType:
        parts: list[RenderableType] = list(self.renderer.partials())
        board = self.board.render()
        if board is not None:
            parts.append(board)
        parts += self.renderer.batches.live(self.console.width)
        elapsed = time.monotonic() - self._turn_started
        what = "cancelling" if self._cancelling else "working"
        waiting = f" · {desk.waiting} waiting for approval" if desk.waiting else ""
        self._spinner.update(text=Text(f"{what} · {elapsed:.0f} s{waiting} · Ctrl-C cancels the turn", style="dim"))
        parts.append(self._spinner)
        questions = desk.view()
        if questions is not None:
            parts.append(questions)
        return Group(*parts)
