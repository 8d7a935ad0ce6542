"""The pieces of an agent panel's header, as HTML: its kind (type, job, model), its sandbox, its usage, times."""

from __future__ import annotations

from decimal import Decimal

from . import _html

__all__ = ["format_seconds", "kind_html", "sandbox_html", "usage_html"]


def kind_html(agent_type: str, description: str, model: str) -> str:
    """A subagent's type, the title of its job and its model."""
    kind = f'<span class="freeact-type">{_html.escape(agent_type)}</span> '
    if description:
        kind += f'<span class="freeact-description">{_html.escape(description)}</span> '
    if model:
        kind += f'<span class="freeact-model">{_html.escape(model)}</span> '
    return kind


def sandbox_html(profile: str, note: str) -> str:
    """The sandbox profile the agent's kernel runs under (with why, when it is `off` unasked); empty until known."""
    if not profile:
        return ""
    off = " freeact-sandbox-off" if profile == "off" else ""
    tip = f' title="{_html.escape(note)}"' if note else ""
    said = f" ({_html.escape(note)})" if note else ""
    return f'<span class="freeact-sandbox{off}"{tip}>sandbox: {_html.escape(profile)}{said}</span> '


def usage_html(tokens: int, cost: Decimal | None, retries: int) -> str:
    """` · 1,234 tokens · $0.0012 · 2 retries` (each part only when there is something to say)."""
    retried = (f' · <span class="freeact-retries" data-retries="{retries}">{retries} '
               f"retr{'y' if retries == 1 else 'ies'}</span>") if retries else ""
    if not tokens:
        return retried
    spent = f" · ${cost:.4f}" if cost is not None else ""
    return f' · <span class="freeact-usage" data-tokens="{tokens}">{tokens:,} tokens{spent}</span>{retried}'


def format_seconds(seconds: float) -> str:
    """`42s`, `3m 05s`."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes}m {seconds:02d}s"
