"""`/rewind` in the terminal: the list of turns with the files each changed; `/rewind N` goes back to before turn N.

Going back restores the folder's files and the conversation, and restarts the kernel (`Agent.rewind`); the
line it prints says what was restored and how to undo it (`/rewind M`, M the checkpoint taken just before).
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from freeact_sub import FreeactError

from .safe_text import clean

if TYPE_CHECKING:
    from freeact_sub import Agent

    from .render import Renderer

__all__ = ["rewind_command", "turns_table"]


def turns_table(agent: Agent) -> Table | None:
    """The checkpoints as a table (number, when, what, files changed); None if there are none."""
    points = agent.checkpoints()
    if not points:
        return None
    table = Table(
        title="Turns you can rewind to (/rewind N goes back to before turn N)",
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    for column, style in (("N", "bold"), ("at", "dim"), ("turn", ""), ("files it changed", "cyan")):
        table.add_column(column, style=style or None, overflow="fold")
    for point in points:
        when = datetime.datetime.fromtimestamp(point.at).strftime("%H:%M:%S")
        what = f"{point.turn}. of “{point.label}”" if point.kind == "turn" else point.label
        files = ", ".join(point.files[:8]) + (f", … ({len(point.files)})" if len(point.files) > 8 else "")
        table.add_row(str(point.number), when, Text(clean(what)), Text(clean(files or "—")))
    return table


async def rewind_command(agent: Agent, renderer: Renderer, argument: str) -> None:
    """`/rewind`: list the turns; `/rewind N`: rewind to before turn N and say what it did."""
    argument = argument.strip()
    if not argument:
        table = turns_table(agent)
        if table is None:
            reason = agent.rewinds.off_reason
            renderer.note(f"Nothing to rewind to{f': {reason}' if reason else ' yet (no turn has run)'}.", style="dim")
        else:
            renderer.console.print(table)
        return
    if not argument.isdigit():
        renderer.note(f"usage: /rewind [N] (N a number of the list; {argument!r} is not)", style="yellow")
        return
    renderer.note(f"Rewinding to before turn {argument}: the files, the conversation, and a new kernel…", style="dim")
    try:
        event = await agent.rewind(int(argument))
    except (ValueError, RuntimeError, FreeactError, OSError) as exc:
        renderer.note("Not rewound:", style="yellow", detail=str(exc))
        return
    renderer.note(event.content, style="bold yellow")
