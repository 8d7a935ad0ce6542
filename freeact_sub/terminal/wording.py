"""How the terminal words what happened: waits, retries, states in the status table, saved images' paths, and
model text as Markdown (controls removed)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rich.markdown import Markdown

from freeact_sub import ApprovalRequest, ContextCompacted, ModelRetry

from .safe_text import clean

__all__ = ["PLAIN_PATH", "SAVED_IMAGE", "compacted_note", "markdown", "near", "one_line", "retry_note", "running_state",
           "seconds", "title_line", "waiting_for", "what_it_runs"]


def seconds(value: float) -> str:
    """`0.4 s`, `4 s`, `32 s`: a wait as a person reads it."""
    return f"{value:.1f} s" if value < 1 else f"{value:.0f} s"


def retry_note(retry: ModelRetry) -> str:
    """`attempt 2/6 · rate limited`."""
    of = f"/{retry.attempts}" if retry.attempts else ""
    return f"attempt {retry.attempt}{of} · {retry.reason}"


def compacted_note(event: ContextCompacted) -> str:
    """`context compacted (window nearly full): 151,204 → 9,812 tokens · 212 messages summarized, 4 kept`."""
    focus = f" · focus: {one_line(event.focus, 80)}" if event.focus else ""
    return (f"context compacted ({event.reason}): {event.tokens_before:,} → "
            f"{event.tokens_after:,} tokens · {event.messages_summarized} messages summarized, {event.messages_kept} "
            f"kept{focus}")


def one_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def markdown(text: str, code_theme: str = "monokai") -> Markdown:
    """Model text as Markdown, controls removed; a link shows its address (a terminal link would hide it). Code
    blocks in it are drawn in `code_theme` (the background's: `Palette.code_theme`)."""
    return Markdown(clean(text), hyperlinks=False, code_theme=code_theme)


SAVED_IMAGE = re.compile(r"\[image saved: (.+)\]")
PLAIN_PATH = re.compile(r"[A-Za-z0-9._/~+-]+\.png")


def near(path: str) -> str:
    """`path` relative to the current folder when it is inside it (`.freeact-sub/images/…png`), else as it is."""
    try:
        return str(Path(path).relative_to(Path.cwd())) if Path(path).is_absolute() else path
    except (ValueError, OSError):
        return path


def title_line(text: str) -> str:
    """The first line that says anything, controls removed (a subagent's title, or its prompt's start)."""
    return next((line.strip() for line in clean(text).split("\n") if line.strip()), "")


def what_it_runs(request: ApprovalRequest) -> str:
    """What a question asks to run, for the status table: `code`, `a subagent`, or the tool's name."""
    what = {"execute_ipython_cell": "code", "task": "a subagent"}.get(request.tool_name, request.tool_name)
    return clean(what)


def decided_call(request: ApprovalRequest, width: int = 48) -> str:
    """Which call a decision line answers, short: `code: print(primes[:10])`, `subagent (plan): Outline the …`,
    `demo_constant`; several questions may be open at once."""
    args = request.tool_args
    if request.tool_name == "execute_ipython_cell":
        what = f"code: {title_line(str(args.get('code', '')))}"
    elif request.tool_name == "task":
        what = f"subagent ({args.get('subagent_type') or 'general'}): " + title_line(
            str(args.get("description") or args.get("prompt", "")))
    elif request.tool_name == "reset_kernel":
        what = "kernel reset"
    else:
        what = clean(request.tool_name)
    return what if len(what) <= width else what[: width - 1].rstrip() + "…"


def waiting_for(children: list[str]) -> str:
    """`waiting for agent-1d74`, `waiting for agent-1d74, agent-bbb5`, `waiting for 3 subagents`."""
    return f"waiting for {', '.join(children)}" if len(children) <= 2 else f"waiting for {len(children)} subagents"


def running_state(request: ApprovalRequest) -> str:
    names: dict[str, Any] = {
        "execute_ipython_cell": "running code",
        "task": "starting subagent",
        "reset_kernel": "resetting kernel",
    }
    return str(names.get(request.tool_name, f"calling {request.tool_name}"))
