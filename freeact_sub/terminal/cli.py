"""The `freeact-sub` command: flags, configuration, and the lifecycle of one session.

Configuration precedence, highest first: flags > `FREEACT_SUB_*` environment variables >
`--config FILE`; a `.env` file in the working directory is loaded into the environment first
(without overriding variables already set), but only its provider keys and harmless settings
(`env_file.py`). The project's agent types that carry powers are used only in a trusted folder
(`trust.py`: asked once, or `--trust-project` / `--no-trust-project`). Every configuration problem
(a bad file, an unknown model, a missing API key) is reported in one line before any kernel starts; a failing MCP server
is reported the same way, and whatever had started is stopped.

Exit codes: 0 done; 1 the turn failed, was rejected or hit its turn limit, or an MCP server or
kernel failed to start; 2 a usage or configuration error; 130 cancelled with Ctrl-C; 128+N
ended by signal N.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from freeact_sub import Agent, AgentConfig
    from freeact_sub.demo import DemoServer

    from .theme import Theme

__all__ = ["build_parser", "main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


class UsageError(Exception):
    """A problem with the command line, the configuration or the environment: one line, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    from freeact_sub import __version__

    parser = argparse.ArgumentParser(
        prog="freeact-sub",
        description=(
            "A code-action agent in your terminal: it writes Python that runs in an IPython kernel, "
            "starts subagents for independent jobs, and asks you before each action, naming the agent."
        ),
        epilog=(
            "Enter sends, Alt-Enter or Ctrl-J starts a new line; Ctrl-C cancels a running turn, and at an "
            "empty prompt Ctrl-C or Ctrl-D exits. Try it without an API key: freeact-sub --demo"
        ),
    )
    parser.add_argument("-p", "--prompt", help="one-shot mode: run this prompt, print the final answer, exit")
    parser.add_argument(
        "--timeline",
        metavar="FILE",
        help="with -p: draw who did what when into FILE (.svg, .png or .html) when the run ends",
    )
    parser.add_argument(
        "--model",
        help="a pydantic-ai model string (openai:gpt-4.1, anthropic:…), or with --base-url the server's model name",
    )
    parser.add_argument("--base-url", help="base URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp)")
    parser.add_argument("--api-key-env", metavar="NAME", help="environment variable holding the API key for --base-url")
    parser.add_argument("--mcp-config", metavar="FILE", help='MCP servers, a JSON file in the "mcpServers" shape')
    parser.add_argument("--max-subagents", type=int, metavar="N", help="how many subagents may run at once")
    parser.add_argument("--max-turns", type=int, metavar="N", help="limit on model rounds per prompt")
    parser.add_argument(
        "--model-retries", type=int, metavar="N",
        help="how often a model request that failed before it acted is retried (429, 529, 5xx, a dropped stream)",
    )
    parser.add_argument(
        "--max-model-requests", metavar="N",
        help="how many model requests all agents have in flight at once ('none': no bound)",
    )
    parser.add_argument(
        "--stream-idle-timeout", metavar="S",
        help="seconds a model's stream may stay silent before the request is retried ('none': no limit)",
    )
    parser.add_argument(
        "--max-depth", type=int, metavar="N", help="how deep subagents may nest (1: only the main agent starts them)"
    )
    parser.add_argument(
        "--max-cost", type=float, metavar="USD", help="a budget for the session: all agents stop once they cost this"
    )
    parser.add_argument(
        "--mcp-tools",
        choices=("calls", "code", "both"),
        help="offer MCP tools as tool calls, as Python functions in the kernel, or both (the default)",
    )
    parser.add_argument("--working-dir", metavar="DIR", help="the kernels' working directory (default: here)")
    parser.add_argument(
        "--kernel-gateway",
        metavar="URL",
        help="run every kernel on this Jupyter Kernel/Enterprise Gateway (token in $JUPYTER_GATEWAY_AUTH_TOKEN)",
    )
    parser.add_argument(
        "--gateway-username",
        metavar="NAME",
        help="the user the gateway starts kernels for (KERNEL_USERNAME; default: yours; Enterprise Gateway checks "
        "it; also FREEACT_SUB_GATEWAY_USERNAME)",
    )
    parser.add_argument(
        "--subagent-models",
        metavar="MODELS",
        help="models the agent may pick for a subagent, comma-separated "
        "(anthropic:claude-haiku-4-5,openai:gpt-4.1-mini; also FREEACT_SUB_SUBAGENT_MODELS)",
    )
    parser.add_argument("--config", metavar="FILE", help="a JSON or TOML file with AgentConfig fields")
    parser.add_argument(
        "--agent",
        metavar="NAME",
        help="run the main agent as this agent type (from .freeact-sub/agents/*.md, ~/.config/freeact-sub/agents/, "
        "or the config's agents table)",
    )
    parser.add_argument(
        "--sandbox",
        metavar="PROFILE",
        help="what the agents' code may touch: workspace (default: no secrets, writes only in the working dir), "
        "offline (no network either), packages (network: the Python package index only), read-only, or off "
        "(also FREEACT_SUB_SANDBOX)",
    )
    parser.add_argument(
        "--auto-approve",
        action="store_true",
        default=None,
        help="run every action of every agent without asking (also FREEACT_SUB_AUTO_APPROVE=1)",
    )
    parser.add_argument(
        "--trust-project",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="use (or, with --no-trust-project, leave out) this folder's agent types that carry hooks, endpoints, "
        "keys' names, MCP servers, allow rules or a wider sandbox, without asking (default: ask once per folder)",
    )
    parser.add_argument(
        "--theme",
        choices=("light", "dark"),
        help="colours for a light or a dark terminal background (default: asked of the terminal; also "
        "FREEACT_SUB_THEME)",
    )
    parser.add_argument("--demo", action="store_true", help="offline demo: a scripted model, real kernels and MCP")
    parser.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        metavar="ID",
        help="continue a saved session (default: the one used last); list them with: freeact-sub sessions",
    )
    parser.add_argument("--version", action="version", version=f"freeact-sub {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["sessions"]:
        from .sessions_cmd import sessions_main

        return sessions_main(argv[1:])
    if argv[:1] == ["trust"]:
        from .trust_cmd import trust_main

        return trust_main(argv[1:])
    args = build_parser().parse_args(argv)
    runner = _Runner(args)
    try:
        return asyncio.run(runner.run())
    except UsageError as exc:
        _complain(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    except asyncio.CancelledError:
        return 128 + (runner.ended_by or signal.SIGTERM)


class _Runner:
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
            _check_prompt_text(args.prompt)
        if args.timeline is not None:
            _check_timeline_file(args.timeline, one_shot)
        if not one_shot and not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError("the interactive session needs a terminal; use -p PROMPT for one-shot mode")
        from .screen import ScreenConsole
        from .warning_lines import warnings_as_lines

        console = ScreenConsole(stderr=one_shot)
        with warnings_as_lines(console):  # a library's warning is one styled line, never a traceback-like block
            return await self._run_with(console)

    async def _run_with(self, console: Any) -> int:
        from freeact_sub import ConfigError, FreeactError

        args = self.args
        one_shot = args.prompt is not None
        working_dir = _working_dir(args.working_dir)
        _load_dotenv(working_dir)
        if args.demo:
            self.demo = _start_demo()
        try:
            config = _build_config(args, working_dir, self.demo)
            if one_shot and not sys.stdin.isatty() and not config.auto_approve:
                raise UsageError(
                    "-p without a terminal cannot ask for approvals; add --auto-approve "
                    "(or set FREEACT_SUB_AUTO_APPROVE=1) to run every action of every agent without asking"
                )
            config.resolve_model()  # a missing API key or an unknown model is reported before any kernel starts
        except ConfigError as exc:
            raise UsageError(str(exc)) from None

        from freeact_sub import Agent, SessionError

        from .keys import enter_stays_enter
        from .theme import choose_background, theme_for
        from .trust import TrustRefused, settle_trust

        asks = sys.stdin.isatty() and sys.stdout.isatty() and os.isatty(sys.stdout.fileno())
        try:
            self.theme = theme_for(choose_background(args.theme, os.environ,
                                                     tty_fds=(sys.stdin.fileno(), sys.stdout.fileno()) if asks
                                                     else None))
        except ValueError as exc:
            raise UsageError(str(exc)) from None

        try:
            agent = Agent(config, session=args.resume)
            await settle_trust(agent, args.trust_project, console)
        except (SessionError, ConfigError, TrustRefused) as exc:
            raise UsageError(str(exc)) from None
        with enter_stays_enter():  # a line typed while the kernel starts or a turn runs is sent when the prompt is up
            try:
                with console.status("Starting the kernel and MCP servers …", spinner="dots") as status, \
                        self._ctrl_c_stops_the_start(status):
                    await agent.start()
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if not self.start_cancelled or task is None:
                    raise
                task.uncancel()  # the cancel was ours: stop what had started (timeouts in it work as usual)
                self.stopping = True
                with _sigint_ignored(), console.status("Cancelled: stopping what had started …", spinner="dots"):
                    await agent.stop()
                _complain("cancelled while starting (Ctrl-C); nothing was left running")
                return EXIT_CANCELLED
            except FreeactError as exc:
                self.stopping = True
                await agent.stop()
                _complain(str(exc))
                # a bad type file or field, or a server command that does not exist: found before any kernel starts
                return EXIT_USAGE if isinstance(exc, ConfigError) else EXIT_FAILED
            try:
                return await self._session(agent, config, console)
            finally:
                self.stopping = True
                with _sigint_ignored(), console.status("Stopping kernels and MCP servers …", spinner="dots"):
                    await agent.stop()

    async def _session(self, agent: Agent, config: AgentConfig, console: Any) -> int:
        from .banner import banner
        from .session import Session

        args = self.args
        session = Session(agent, console, ask_keys=sys.stdin.isatty(), show_final=args.prompt is None,
                          theme=self.theme)
        console.print(banner(agent, config, session.palette, demo=self.demo, one_shot=args.prompt is not None))
        if args.resume is not None and agent.session_id is not None:
            _show_resumed(console, agent.session_id, config.working_dir, agent.agent_id)
        if args.prompt is None:
            from .prompt import PromptReader

            await session.interactive(PromptReader(config.working_dir / ".freeact-sub" / "history"))
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
                _complain(f"--timeline {args.timeline}: the timeline could not be written: {exc}")
            else:
                print(clean(f"timeline: {path}"), file=sys.stderr)
        if outcome.status == "failed":
            _complain(outcome.error or "the turn failed")
            return EXIT_FAILED
        if outcome.status == "cancelled":
            print("freeact-sub: cancelled", file=sys.stderr)
            return EXIT_CANCELLED
        _print_answer(outcome.answer or "")
        if outcome.status != "done":
            reason = "an action was rejected" if outcome.status == "rejected" else "the turn limit was reached"
            print(f"freeact-sub: {reason}", file=sys.stderr)
            return EXIT_FAILED
        return EXIT_FAILED if timeline_failed else EXIT_OK


def _show_resumed(console: Any, session_id: str, working_dir: Path, agent_id: str) -> None:
    """The last turn of a resumed session, printed as it was shown live, and what resuming means."""
    from rich.text import Text

    from freeact_sub.sessions import open_session

    from .sessions_cmd import print_transcript

    print_transcript(console, open_session(session_id, working_dir), agent_id, last_turns=1)
    console.print()
    console.print(Text(f"Resumed session {session_id}. The conversation goes on; the kernel is new "
                       "(earlier variables are gone, files remain).", style="yellow"))


def _check_prompt_text(prompt: str) -> None:
    """`-p` text that is not valid UTF-8 is refused before anything starts (no kernel, no session)."""
    from .input_text import first_undecodable

    where = first_undecodable(prompt)
    if where is not None:
        raise UsageError(f"-p: the prompt is not valid UTF-8 (a byte at character {where + 1} is not); "
                         "pass the text as UTF-8 (iconv -t UTF-8)")


def _check_timeline_file(name: str, one_shot: bool) -> None:
    """`--timeline FILE` goes with `-p` and names a file the timeline can be drawn as."""
    if not one_shot:
        raise UsageError(
            "--timeline goes with -p PROMPT; for a saved session: freeact-sub sessions show ID --timeline FILE"
        )
    path = Path(name).expanduser()
    if path.suffix.lower() not in (".svg", ".png", ".html", ".htm"):
        raise UsageError(f"--timeline {name}: name a .svg, .png or .html file")
    folder = path.parent
    if path.is_dir():
        raise UsageError(f"--timeline {name}: that is a folder; name a file in it")
    if not folder.is_dir():
        raise UsageError(f"--timeline {name}: the folder {folder} does not exist (checked before the run)")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"--timeline {name}: {path if path.exists() else folder} is not writable")


def _working_dir(flag: str | None) -> Path:
    raw = flag or os.environ.get("FREEACT_SUB_WORKING_DIR") or os.getcwd()
    path = Path(raw).expanduser().resolve()
    if not path.is_dir():
        raise UsageError(f"working directory {raw}: not a directory")
    return path


def _load_dotenv(working_dir: Path) -> None:
    """The working folder's `.env`: its provider keys and harmless settings; one warning line names the rest."""
    from .env_file import ignored_warning, load_project_env

    ignored = load_project_env(working_dir)
    if ignored:
        _complain(ignored_warning(ignored))  # the names are the file's: cleaned


def _start_demo() -> DemoServer:
    from freeact_sub.demo import start_demo_server
    from freeact_sub.demo.server import chunk_delay_from_env

    try:
        delay = chunk_delay_from_env()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return start_demo_server(chunk_delay=delay)


def _build_config(args: argparse.Namespace, working_dir: Path, demo: DemoServer | None) -> AgentConfig:
    from freeact_sub import AgentConfig, load_mcp_config

    overrides: dict[str, Any] = {
        "model": args.model,
        "base_url": args.base_url,
        "api_key_env": args.api_key_env,
        "max_subagents": args.max_subagents,
        "max_turns": args.max_turns,
        "model_retries": args.model_retries,
        "max_model_requests": args.max_model_requests,
        "stream_idle_timeout": args.stream_idle_timeout,
        "max_depth": args.max_depth,
        "max_cost": args.max_cost,
        "sandbox": args.sandbox,
        "mcp_tools": args.mcp_tools,
        "working_dir": working_dir,
        "auto_approve": args.auto_approve,
        "kernel_gateway": args.kernel_gateway,
        "agent": args.agent,
        "subagent_models": args.subagent_models,
    }
    mcp_config = args.mcp_config
    if demo is not None:
        if args.model or args.base_url:
            raise UsageError("--demo uses the scripted demo model: leave out --model and --base-url")
        from freeact_sub.demo import DEMO_MCP_SERVER, DEMO_MODEL, demo_agent_types

        servers = load_mcp_config(mcp_config) if mcp_config else {}
        overrides.update(
            model=DEMO_MODEL,
            base_url=demo.base_url_for("openai"),
            mcp_servers={"demo": dict(DEMO_MCP_SERVER), **servers},
            agents=demo_agent_types(demo),  # the reviewer type, on the same server's Anthropic protocol
        )
        mcp_config = None
    config = AgentConfig.load(args.config, mcp_config=mcp_config, gateway_username=args.gateway_username, **overrides)
    if demo is not None and config.api_key_env:
        config.api_key_env = None  # the demo server needs no key, whatever the environment says
    return config


def _print_answer(answer: str) -> None:
    """The final answer on stdout: Markdown in a terminal, else plain text; terminal controls removed either way
    (piped into a file, it still reaches a screen when someone reads the file)."""
    from .safe_text import clean

    answer = clean(answer)
    if sys.stdout.isatty():
        from rich.markdown import Markdown

        from .screen import ScreenConsole

        ScreenConsole().print(Markdown(answer, hyperlinks=False))
    else:
        sys.stdout.write(answer.rstrip("\n") + "\n")
        sys.stdout.flush()


def _complain(text: str) -> None:
    """`freeact-sub: TEXT` on stderr; the text may quote what we did not write (see `safe_text.message`)."""
    from .safe_text import message

    print("freeact-sub: " + message(text), file=sys.stderr)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ctrl-C while kernels and MCP servers stop must not cut the cleanup short."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


if __name__ == "__main__":
    sys.exit(main())
