"""`freeact-sub sessions`: list saved sessions, and show one agent's transcript as the live view showed it.

    freeact-sub sessions                         id, start, status, first prompt, agents, tokens
    freeact-sub sessions show [ID]               the main agent's transcript, children included
    freeact-sub sessions show ID --agent agent-3fa2
    freeact-sub sessions show ID --timeline t.svg    who did what when, drawn (.svg, .png or .html)

A transcript is replayed into the events a live run produced and printed by the same
`Renderer` the live session uses.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .safe_text import clean

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from freeact_sub import ApprovalRequest
    from freeact_sub.sessions import SavedDecision, SavedSession

    from .render import Renderer

__all__ = ["print_transcript", "sessions_main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="freeact-sub sessions",
        description="List the saved sessions of a working directory, or show one agent's transcript.",
        epilog="Resume a session with: freeact-sub --resume [ID]",
    )
    parser.add_argument("--working-dir", metavar="DIR", help="whose sessions to read (default: here)")
    commands = parser.add_subparsers(dest="command", metavar="{list,show}")
    listing = commands.add_parser("list", help="list the sessions, the one used last first (the default)")
    show = commands.add_parser("show", help="print a transcript with the live renderer")
    for subcommand in (listing, show):  # the flag works after the subcommand too
        subcommand.add_argument("--working-dir", metavar="DIR", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    show.add_argument("session_id", nargs="?", default="latest", metavar="ID", help="a session id (default: latest)")
    show.add_argument("--agent", metavar="AGENT_ID", help="a subagent's transcript instead of the main agent's")
    show.add_argument(
        "--timeline", metavar="FILE", help="draw the session's timeline into FILE (.svg, .png or .html) instead"
    )
    return parser


def sessions_main(argv: list[str]) -> int:
    """Run `freeact-sub sessions …`; returns the exit code."""
    from freeact_sub import SessionError
    from freeact_sub.sessions import list_sessions, open_session

    from .screen import ScreenConsole

    args = build_parser().parse_args(argv)
    raw = args.working_dir or os.environ.get("FREEACT_SUB_WORKING_DIR") or os.getcwd()
    working_dir = Path(raw).expanduser().resolve()
    console = ScreenConsole()
    try:
        if args.command == "show":
            saved = open_session(args.session_id, working_dir)
            agent_id = args.agent or saved.main_id
            if agent_id not in saved.agents:
                known = ", ".join(saved.agents)
                raise SessionError(f"session {saved.session_id} has no agent {agent_id!r} (it has {known})")
            if args.timeline is not None:
                return _draw_timeline(saved, args.timeline)
            print_transcript(console, saved, agent_id)
            from .session_usage import agents_usage_table

            console.print(agents_usage_table(saved))

            from .change_view import print_kept_changes

            print_kept_changes(console, saved.path)
            return EXIT_OK
        sessions = list_sessions(working_dir)
    except SessionError as exc:
        _complain(str(exc))
        return EXIT_USAGE
    if not sessions:
        console.print(f"No saved sessions in {working_dir}.", style="dim")
        return EXIT_OK
    console.print(_table(sessions))
    return EXIT_OK


def _draw_timeline(saved: SavedSession, target: str) -> int:
    from freeact_sub import timeline

    try:
        path = timeline(saved).save(target)
    except ValueError as exc:  # a file type it cannot draw, or a session with no messages yet
        _complain(str(exc))
        return EXIT_USAGE
    except OSError as exc:
        _complain(f"cannot write the timeline to {target}: {exc.strerror}")
        return EXIT_FAILED
    print(clean(f"timeline of session {saved.session_id} ({len(saved.agents)} agents): {path}"))
    return EXIT_OK


def _complain(text: str) -> None:
    """`freeact-sub: TEXT` on stderr; the text may quote what we did not write (see `safe_text.message`)."""
    from .safe_text import message

    print("freeact-sub: " + message(text), file=sys.stderr)


def _table(sessions: list[SavedSession]) -> object:
    rows: list[tuple[str, ...]] = []
    for saved in sessions:
        main = saved.agents.get(saved.summary.main_id or "")
        status = "in use" if saved.in_use else (main.status if main else "empty")
        started = (saved.created or "").replace("T", " ").removesuffix("+00:00")
        first = clean(" ".join(saved.first_prompt.split()))  # a prompt of many lines, in one
        rows.append((saved.session_id, started, status, first, str(len(saved.agents)), f"{saved.total_tokens:,}"))
    return _SessionTable(rows)


_PROMPT_ROOM = 24
"""Fewer cells than this for the first prompt, and the start time is shortened, then left out (the id says it too)."""


class _SessionTable:
    """One line per session at any width: the first prompt takes the room the other columns leave, cut with `…`."""

    columns = ("id", "started", "status", "first prompt", "agents", "tokens")

    def __init__(self, rows: list[tuple[str, ...]]) -> None:
        self.rows = rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.cells import cell_len
        from rich.table import Table
        from rich.text import Text

        rows = self.rows
        prompt = self.columns.index("first prompt")
        for shorten in (str, lambda started: started[:16], None):  # 2026-11-27 07:59:43, 2026-11-27 07:59, left out
            shown = [i for i, _ in enumerate(self.columns) if shorten is not None or self.columns[i] != "started"]
            rows = [tuple(shorten(cell) if self.columns[i] == "started" and shorten else cell
                          for i, cell in enumerate(row)) for row in self.rows]
            widths = {i: max([len(self.columns[i]), *(cell_len(row[i]) for row in rows)]) for i in shown}
            room = options.max_width - sum(w for i, w in widths.items() if i != prompt) - 2 * (len(shown) - 1)
            if room >= min(widths[prompt], _PROMPT_ROOM):
                break
        table = Table(box=None, header_style="bold", pad_edge=False)
        for i in shown:
            name = self.columns[i]
            if i == prompt:
                table.add_column(name, no_wrap=True, overflow="ellipsis", max_width=max(min(room, widths[i]), 1))
            else:
                table.add_column(name, no_wrap=True, min_width=widths[i],
                                 justify="right" if name in ("agents", "tokens") else "left")
        for row in rows:
            table.add_row(*(Text(row[i]) for i in shown))  # never read as markup
        yield table


def print_transcript(console: Console, saved: SavedSession, agent_id: str, *, last_turns: int | None = None) -> None:
    """Print an agent's transcript (its children inline) with the live renderer; `last_turns` keeps only the last N."""
    from rich.text import Text

    from freeact_sub import ApprovalRequest
    from freeact_sub.sessions import SavedDecision, UserPrompt

    from .gutter import Gutter
    from .palette import Palette
    from .render import Renderer
    from .status import SubagentBoard
    from .theme import Background, choose_background, theme_for

    background: Background
    try:  # the background as the flag-less environment says it (no query: the transcript may go to a pipe)
        background = choose_background(None, os.environ)
    except ValueError:
        background = "dark"
    palette = Palette(theme=theme_for(background))
    palette.colour(agent_id)
    renderer = Renderer(console, palette, SubagentBoard(palette), main_id=agent_id, show_final=True)
    events = saved.events(agent_id)
    if last_turns is not None:
        starts = [i for i, e in enumerate(events) if isinstance(e, UserPrompt) and e.agent_id == agent_id]
        if len(starts) > last_turns:
            skipped = len(starts) - last_turns
            console.print(Text(f"… {skipped} earlier turn{'s' if skipped != 1 else ''} "
                               f"(freeact-sub sessions show {saved.session_id})", style="dim"))
            events = events[starts[-last_turns]:]
    for index, event in enumerate(events):
        if isinstance(event, UserPrompt):
            if event.agent_id == agent_id:  # a child's task is shown by its "started" line
                console.print()
                console.print(Gutter(Text(clean(event.content)), Text.assemble(("you", "bold"), ("  › ", "dim")),
                                     Text("     │ ", style="dim")))
        elif isinstance(event, ApprovalRequest):
            following = events[index + 1] if index + 1 < len(events) else None
            if isinstance(following, SavedDecision) and following.tool_call_id == event.tool_call_id:
                _show_decided(renderer, event, following)
            else:  # a session saved before decisions were: only whether the call ran is known
                renderer.show_request(event, note="approved" if event.decision else "rejected")
        elif not isinstance(event, SavedDecision):
            renderer.handle(event)
    pending = sum(1 for event in events if isinstance(event, SavedDecision) and event.by == "pending")
    if pending:
        console.print(Text(f"{pending} question{'s were' if pending != 1 else ' was'} still waiting for an answer when "
                           "the session ended (the process was killed or lost its terminal)", style="yellow"))


def _show_decided(renderer: Renderer, request: ApprovalRequest, saved: SavedDecision) -> None:
    """Show a call and its decision in the words the live terminal used when it was decided."""
    if saved.by in ("auto", "rule", "hook"):
        renderer.handle(request)  # decided before anyone was asked: the live renderer said so itself
        return
    if request.hook:
        renderer.show_rewrite(request)
    agent = request.agent_id
    if saved.by == "standing" and not saved.covered:  # a standing decision was there before it was shown
        renderer.show_request(request, note="auto-approved (standing decision)")
        return
    renderer.show_request(request)  # the question as it was put to the person
    if saved.by == "standing":
        renderer.show_request(request, note="auto-approved (standing decision)")
    elif saved.by == "person" and saved.approved:
        text = {"agent": f"approved, and always for {agent} from now on",
                "all": "approved, and always for every agent from now on"}.get(saved.always or "", "approved")
        renderer.show_decision(request, text, approved=True)
    elif saved.by == "person":
        text = f"rejected, the model is told: {saved.reason}" if saved.reason else "rejected"
        renderer.show_decision(request, text, approved=False, goes_on=saved.reason is not None)
    elif saved.by == "pending":
        renderer.show_decision(request, "never answered: the session ended while this question waited (it did not run)",
                               approved=False)
    elif saved.by == "cancelled" and saved.stopped_by == "the user" and agent != renderer.main_id:
        renderer.show_decision(request, "stopping this subagent; its parent is told and goes on",
                               approved=False, goes_on=True)
