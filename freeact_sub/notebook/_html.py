"""HTML snippets for the widgets: Markdown, highlighted code, escaped text.

Everything the model or a kernel wrote is escaped here before it reaches an `HTML` widget;
Markdown is rendered with raw HTML turned off, so a model cannot inject markup or scripts.
"""

from __future__ import annotations

import html
import json
from functools import cache
from typing import Any

from ._style import CODE_CLASS_PREFIX

__all__ = ["code", "copy_button", "escape", "event_note", "markdown", "preformatted", "tool_arguments"]

_MAX_SHOWN = 20_000
"""Characters of a cell's output kept on screen (the tail); the full text stays in the event."""


def escape(text: str) -> str:
    return html.escape(text, quote=True)


_COPY_SCRIPT = (
    "const b = this; const said = t => { b.textContent = t; setTimeout(() => { b.textContent = 'Copy'; }, 1500); };"
    " (navigator.clipboard ? navigator.clipboard.writeText(b.dataset.code) : Promise.reject())"
    ".then(() => said('Copied'), () => said('Copy failed'));"
)
"""The browser writes the clipboard (a kernel cannot): the code travels in the button's `data-code`, escaped."""


def copy_button(source: str) -> str:
    """A **Copy** button that puts `source` (a cell the agent ran) on the clipboard, in the browser itself."""
    return (f'<button class="freeact-copy-button" type="button" title="Copy this code to the clipboard" '
            f'data-code="{escape(source)}" onclick="{escape(_COPY_SCRIPT)}">Copy</button>')


def event_note(event: Any) -> str:
    """A one-line note in an agent's panel: a hook that failed (`HookFailed`), a compaction (`ContextCompacted`)."""
    if hasattr(event, "tokens_before"):  # ContextCompacted
        focus = f" · focus: {escape(event.focus)}" if event.focus else ""
        return (f'<div class="freeact-compacted" title="{escape(event.summary)}">⇣ context compacted '
                f"({escape(event.reason)}): {event.tokens_before:,} → {event.tokens_after:,} "
                f"tokens · {event.messages_summarized} messages summarized, {event.messages_kept} kept{focus}</div>")
    return (f'<div class="freeact-hook-error">⚠ hook <code>{escape(event.hook)}</code> failed at '
            f"{escape(event.hook_event_name)}: {escape(event.message)} (left out: the step went on as without it)"
            "</div>")


def compaction_bundle(event: Any) -> dict[str, str]:
    """What `view.compact()` shows in the cell that asked: the readable line, and the summary the model wrote
    under it (folded), as HTML and as plain text; plain markup, so a saved notebook shows it without a kernel."""
    focus = f" · focus: {event.focus}" if event.focus else ""
    line = (f"⇣ context compacted ({event.reason}): {event.tokens_before:,} → {event.tokens_after:,} tokens · "
            f"{event.messages_summarized} messages summarized, {event.messages_kept} kept{focus}")
    markup = (f'<div class="freeact-compacted" style="color: var(--jp-info-color0, #0097a7)">{escape(line)}</div>'
              f"<details><summary>The summary the model wrote</summary>"
              f'<div style="white-space: pre-wrap">{escape(event.summary)}</div></details>')
    return {"text/plain": f"{line}\n\n{event.summary}", "text/html": markup}


@cache
def _highlighter() -> Any:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(nowrap=True, classprefix=CODE_CLASS_PREFIX)


def code(source: str, language: str = "python") -> str:
    """`source` as a `<pre>` block, highlighted with token classes the stylesheet colours from the theme."""
    from pygments import highlight
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(language)
    except ClassNotFound:
        return preformatted(source, "freeact-code")
    body = highlight(source, lexer, _highlighter()).rstrip("\n")
    return f'<pre class="freeact-code">{body}</pre>'


def preformatted(text: str, css_class: str = "freeact-pre") -> str:
    """Escaped text in a `<pre>`; very long text is cut to its tail."""
    if len(text) > _MAX_SHOWN:
        text = f"[... {len(text) - _MAX_SHOWN} characters not shown ...]\n" + text[-_MAX_SHOWN:]
    return f'<pre class="{css_class}">{escape(text)}</pre>'


def tool_arguments(arguments: dict[str, Any]) -> str:
    """A tool call's arguments as highlighted JSON."""
    return code(json.dumps(arguments, indent=2, ensure_ascii=False), "json")


@cache
def _markdown_renderer() -> Any:
    from markdown_it import MarkdownIt

    def fence(source: str, language: str, _attrs: str) -> str:
        return code(source, language or "text")

    renderer = MarkdownIt("commonmark", {"html": False, "highlight": fence})
    return renderer.enable(["table", "strikethrough"])


def markdown(text: str) -> str:
    """Markdown rendered to HTML; raw HTML in the text is shown as text, never interpreted."""
    return f'<div class="freeact-markdown">{_markdown_renderer().render(text)}</div>'
