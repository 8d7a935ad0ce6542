"""One run of the terminal command after its flags were parsed: configuration, trust, the agent's start (behind the
prompt in a session), the session or the one-shot turn, and the stop. `cli.py` imports it only once the flags are
read, so `--help` loads none of it (nor asyncio)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freeact_sub.launch import UsageError, build_config, load_dotenv, start_demo, working_dir_from

from .arguments import check_prompt_text, check_timeline_file
from .output import complain, print_answer, show_resumed, sigint_ignored

if TYPE_CHECKING:
    from freeact_sub import Agent, AgentConfig
    from freeact_sub.demo import DemoServer

    from .early_prompt import EarlyPrompt
    from .theme import Theme

__all__ = ["EXIT_CANCELLED", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "Runner"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130
STARTING = "Starting the kernel and MCP servers …"


class Runner:
    """The run of one `freeact-sub` command (its exit code from `run()`)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ended_by: int | None = None
        self.stopping = False
        """Set while the agent stops: a signal then must not cut the cleanup short."""
        self.demo: DemoServer | None = None
        self.start_cancelled = False
        """Set when Ctrl-C stopped the start (the kernel and MCP servers) before the session began."""
        self.theme: Theme | None = None
        """The colours for the terminal's background, chosen before the session starts."""

    async def run(self) -> int:
        self._end_on_signals()
        try:
            code = await self._run()
        finally:
            if self.demo is not None:
                self.demo.close()
        return 128 + self.ended_by if self.ended_by else code

    @contextlib.contextmanager
    def _ctrl_c_stops_the_start(self, status: Any) -> Iterator[None]:
        """Ctrl-C while the kernel and MCP servers start (a slow server) stops the start at once and says so;
        a second Ctrl-C changes nothing (what had started is being stopped)."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def cancel() -> None:
            if self.start_cancelled:
                return
            self.start_cancelled = True
            status.update("Cancelled: stopping what had started …")
            task.cancel()

        previous = signal.signal(signal.SIGINT, lambda signum, frame: loop.call_soon_threadsafe(cancel))
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _end_on_signals(self) -> None:
        """SIGTERM and SIGHUP (terminal closed) cancel everything, so the cleanup below runs."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def end(signum: int) -> None:
            self.ended_by = signum
            if not self.stopping:
                task.cancel()

        for signum in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(signum, end, signum)

    async def _run(self) -> int:
        args = self.args
        one_shot = args.prompt is not None
        if one_shot:
            check_prompt_text(args.prompt)
        if args.timeline is not None:
            check_timeline_file(args.timeline, one_shot)
        if not one_shot and not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError("the interactive session needs a terminal; use -p PROMPT for one-shot mode")
        from .screen import ScreenConsole
        from .warning_lines import warnings_as_lines

        console = ScreenConsole(stderr=one_shot)
        with warnings_as_lines(console):  # a library's warning is one styled line, never a traceback-like block
            return await self._run_with(console)

    async def _run_with(self, console: Any) -> int:
        args = self.args
        working_dir = working_dir_from(args.working_dir)
        load_dotenv(working_dir, complain)
        self.theme = self._choose_theme()
        self.theme.apply(console)  # the trust question too is drawn for this background
        if args.prompt is None:
            return await self._interactive(console, working_dir)
        from .keys import enter_stays_enter

        config = self._configure(working_dir)
        agent = await self._trusted_agent(config, console)
        with enter_stays_enter():  # a line typed while the kernel starts or a turn runs is sent when the prompt is up
            with console.status(STARTING, spinner="dots") as status, self._ctrl_c_stops_the_start(status):
                started = await self._start(agent, console)
            if started is not None:
                return started
            return await self._session_then_stop(agent, config, console)

    async def _interactive(self, console: Any, working_dir: Path) -> int:
        """The prompt first: it reads while the configuration, the model, the agent and its kernel start behind it."""
        from prompt_toolkit.patch_stdout import patch_stdout
        from rich.text import Text

        from .early_prompt import EarlyPrompt
        from .keys import enter_stays_enter
        from .prompt import CtrlC, PromptReader

        style = self.theme.prompt_style if self.theme is not None else "bold ansibrightcyan"
        reader = PromptReader(working_dir / ".freeact-sub" / "history", style=style)
        console.print(Text("freeact-sub · starting the model, the kernel and MCP servers; type ahead, your prompt "
                           "is sent once they are up", style="dim"))

        @contextlib.contextmanager
        def waiting() -> Iterator[None]:
            with console.status(STARTING, spinner="dots") as status, self._ctrl_c_stops_the_start(status):
                yield

        @contextlib.contextmanager
        def leaving(how: EOFError) -> Iterator[None]:
            if not isinstance(how, CtrlC):
                yield
                return
            self.stopping = True
            with sigint_ignored(), console.status("Cancelled: stopping what had started …", spinner="dots"):
                yield

        early = EarlyPrompt(reader, waiting, leaving)
        agent: Agent | None = None
        with enter_stays_enter(), patch_stdout(raw=True):
            try:
                config = await early.during(asyncio.to_thread(self._configure, working_dir))
                if "prestart_pools" not in config.model_fields_set:
                    config.prestart_pools = True  # the pools boot behind the prompt, while the person types
                agent = await self._trusted_agent(config, console, before_asking=early.take_down)
                started = await early.during(self._start(agent, console))
                if started is not None:
                    return started
            except EOFError as exc:  # the person left (Ctrl-D, Ctrl-C at an empty line) while it started
                if agent is not None:
                    with leaving(exc):
                        await agent.stop()
                if isinstance(exc, CtrlC):
                    complain("cancelled while starting (Ctrl-C); nothing was left running")
                    return EXIT_CANCELLED
                return EXIT_OK
            except BaseException:
                await early.take_down()
                raise
            return await self._session_then_stop(agent, config, console, early)

    def _choose_theme(self) -> Theme:
        from .theme import choose_background, theme_for

        asks = sys.stdin.isatty() and sys.stdout.isatty() and os.isatty(sys.stdout.fileno())
        try:
            return theme_for(choose_background(self.args.theme, os.environ,
                                               tty_fds=(sys.stdin.fileno(), sys.stdout.fileno()) if asks else None))
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    def _configure(self, working_dir: Path) -> AgentConfig:
        """The demo server, the config and its model, resolved: every problem with them is one `UsageError` line,
        before any kernel starts. Imports pydantic-ai and the provider's SDK (seconds): the prompt may be up."""
        from freeact_sub import ConfigError

        args = self.args
        if args.sandbox != "off" and os.environ.get("FREEACT_SUB_SANDBOX") != "off" and not args.kernel_gateway:
            _probe_sandbox_beside()
        if args.demo:
            self.demo = start_demo()
        try:
            config = build_config(args, working_dir, self.demo)
            if args.prompt is not None and not sys.stdin.isatty() and not config.auto_approve:
                raise UsageError(
                    "-p without a terminal cannot ask for approvals; add --auto-approve "
                    "(or set FREEACT_SUB_AUTO_APPROVE=1) to run every action of every agent without asking"
                )
            # a missing API key or an unknown model is reported before any kernel starts; a model at a base URL is
            # built (its SDK imported) by the agent's start, beside its kernel's boot
            config.check_model()
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        import freeact_sub.agent.agent  # noqa: F401 - imported here, off the event loop, not when the agent is made

        return config

    async def _trusted_agent(
        self, config: AgentConfig, console: Any, *, before_asking: Callable[[], Awaitable[None]] | None = None
    ) -> Agent:
        """The agent, with the folder's trust settled (by the flag, the remembered trust or the person's answer)."""
        from freeact_sub import Agent, ConfigError, SessionError

        from .trust import TrustRefused, settle_trust

        try:
            agent = Agent(config, session=self.args.resume)
            await settle_trust(agent, self.args.trust_project, console, before_asking=before_asking)
        except (SessionError, ConfigError, TrustRefused) as exc:
            raise UsageError(str(exc)) from None
        return agent

    async def _start(self, agent: Agent, console: Any) -> int | None:
        """Start the agent (its kernel and MCP servers); None when it started, else the exit code (what had started
        is stopped)."""
        from freeact_sub import ConfigError, FreeactError

        try:
            await agent.start()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not self.start_cancelled or task is None:
                raise
            task.uncancel()  # the cancel was ours: stop what had started (timeouts in it work as usual)
            self.stopping = True
            with sigint_ignored(), console.status("Cancelled: stopping what had started …", spinner="dots"):
                await agent.stop()
            complain("cancelled while starting (Ctrl-C); nothing was left running")
            return EXIT_CANCELLED
        except FreeactError as exc:
            self.stopping = True
            await agent.stop()
            complain(str(exc))
            # a bad type file or field, or a server command that does not exist: found before any kernel starts
            return EXIT_USAGE if isinstance(exc, ConfigError) else EXIT_FAILED
        from freeact_sub.start_gc import started

        started()
        return None

    async def _session_then_stop(
        self, agent: Agent, config: AgentConfig, console: Any, early: EarlyPrompt | None = None
    ) -> int:
        try:
            return await self._session(agent, config, console, early)
        finally:
            self.stopping = True
            with sigint_ignored(), console.status("Stopping kernels and MCP servers …", spinner="dots"):
                await agent.stop()

    async def _session(self, agent: Agent, config: AgentConfig, console: Any, early: EarlyPrompt | None) -> int:
        from .banner import banner
        from .session import Session

        args = self.args
        session = Session(agent, console, ask_keys=sys.stdin.isatty(), show_final=args.prompt is None,
                          theme=self.theme)
        console.print(banner(agent, config, session.palette, demo=self.demo, one_shot=args.prompt is not None))
        if args.resume is not None and agent.session_id is not None:
            show_resumed(console, agent.session_id, config.working_dir, agent.agent_id)
        if early is not None:
            await session.interactive(early.reader, early)
            return EXIT_OK
        if args.timeline is not None:
            from freeact_sub import TimelineBuilder

            session.timeline = TimelineBuilder()
        outcome = await session.run_turn(args.prompt)
        from .safe_text import clean
        from .status import usage_report

        print(usage_report(agent.usage, agent.agent_id), file=sys.stderr)
        timeline_failed = False
        if session.timeline is not None:
            try:
                path = session.timeline.build().save(args.timeline)
            except Exception as exc:  # an output option never costs the answer: it is printed below all the same
                timeline_failed = True
                complain(f"--timeline {args.timeline}: the timeline could not be written: {exc}")
            else:
                print(clean(f"timeline: {path}"), file=sys.stderr)
        if outcome.status == "failed":
            complain(outcome.error or "the turn failed")
            return EXIT_FAILED
        if outcome.status == "cancelled":
            print("freeact-sub: cancelled", file=sys.stderr)
            return EXIT_CANCELLED
        print_answer(outcome.answer or "", self.theme)
        if outcome.status != "done":
            reason = "an action was rejected" if outcome.status == "rejected" else "the turn limit was reached"
            print(f"freeact-sub: {reason}", file=sys.stderr)
            return EXIT_FAILED
        return EXIT_FAILED if timeline_failed else EXIT_OK


def _probe_sandbox_beside() -> None:
    """Start the sandbox's platform check now, in a thread: its probe is a process of its own (~0.05 s of CPU, up to
    0.2 s of wall time on a busy machine) that the agent's start would otherwise wait for on the event loop before
    its kernel starts; here it runs while the configuration and the agent's modules load. The agent's own check
    then waits for this one's answer (`platform_problem`), never probes twice."""
    import threading

    from freeact_sub.sandbox import platform_problem

    threading.Thread(target=platform_problem, name="freeact-sub-sandbox-probe", daemon=True).start()
