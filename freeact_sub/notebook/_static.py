"""A static copy of a run's widgets: HTML and plain text that show without a live kernel.

A saved notebook keeps only a reference to widget models, which are gone once the kernel is;
without this copy a reopened notebook shows "Error displaying widget: model not found" for
each run. The copy walks the widget tree, so whatever a panel shows (and whatever later code
adds to it) is copied: `HTML` widgets keep their markup and CSS classes, boxes become `div`s
laid out like them, images are embedded, and controls that only act in a live session
(buttons, the standing-decision checkbox, the reason box) are left out.

It must read the same where JupyterLab sanitizes it (a notebook that is not trusted: a shared
file, a headless run), so the stylesheet's rules are also written into each element's `style`
attribute in a form the sanitizer keeps (`_style.inline_styles`); the `<style>` block stays for
trusted notebooks, where it also hides the copy next to live widgets. Each agent's panel is a
`<details>` whose `<summary>` is its header: open, except a subagent's in a long run.
"""

from __future__ import annotations

import base64
import html
import re

import ipywidgets as widgets

from ._style import inline_styles, static_stylesheet

__all__ = ["static_html", "static_text"]

_SKIPPED = (widgets.Button, widgets.Checkbox, widgets.Text)
_SKIPPED_CLASSES = {"freeact-stylesheet", "freeact-live"}
_CONTROLS = {"freeact-stylesheet", "freeact-copy"}
"""HTML widgets left out of the static copy: the stylesheet (it has its own), controls."""
_TAG = re.compile(r"<[^>]+>")
_BLOCK_END = re.compile(r"</(p|div|pre|h[1-6]|li|tr)>|<br\s*/?>")
_LONG_RUN = 200
"""Lines of a run's transcript past which its subagents' panels start folded."""


def static_html(root: widgets.Widget) -> str:
    """The widget tree under `root` as one self-contained HTML block: inline styles, and the stylesheet for trusted
    notebooks."""
    fold = len(static_text(root).splitlines()) > _LONG_RUN
    return static_stylesheet() + inline_styles(f'<div class="freeact-static">{_html(root, fold)}</div>')


def static_text(root: widgets.Widget) -> str:
    """What the widget tree shows, as plain text (for front ends without HTML)."""
    lines: list[str] = []
    for value in _html_values(root):
        text = html.unescape(_TAG.sub("", _BLOCK_END.sub("\n", value)))
        lines.extend(line.rstrip() for line in text.splitlines() if line.strip())
    return "\n".join(lines)


def _classes(widget: widgets.Widget) -> str:
    return " ".join(c for c in getattr(widget, "_dom_classes", ()) if c not in _SKIPPED_CLASSES)


def _html(widget: widgets.Widget, fold: bool = False) -> str:
    classes = getattr(widget, "_dom_classes", ())
    if isinstance(widget, _SKIPPED) or _CONTROLS & set(classes):
        return ""
    if isinstance(widget, widgets.HTML):
        return f'<div class="{_classes(widget)}">{widget.value}</div>' if widget.value else ""
    if isinstance(widget, widgets.Image):
        encoded = base64.b64encode(bytes(widget.value)).decode("ascii")
        return f'<img class="{_classes(widget)}" src="data:image/{widget.format};base64,{encoded}">'
    foldable = "freeact-panel" in classes or "freeact-batch-row-view" in classes  # a batch's row: its line, its card
    if isinstance(widget, widgets.Box) and foldable and len(widget.children) >= 2:
        # the header, then the rest (a subagent's message box is a third child, left out as a control)
        header, *rest = (_html(child, fold) for child in widget.children)
        body = "".join(rest)
        shut = (fold and "freeact-subagent" in classes) or getattr(widget, "folded", False)
        return (f'<details class="freeact-vbox {_classes(widget)}"{"" if shut else " open"}>'
                f'<summary class="freeact-summary">{header}</summary>{body}</details>')
    if isinstance(widget, widgets.Box):
        kind = "freeact-hbox" if isinstance(widget, widgets.HBox) else "freeact-vbox"
        inner = "".join(_html(child, fold) for child in widget.children)
        return f'<div class="{kind} {_classes(widget)}">{inner}</div>' if inner else ""
    return ""


def _html_values(widget: widgets.Widget) -> list[str]:
    if isinstance(widget, _SKIPPED) or _CONTROLS & set(getattr(widget, "_dom_classes", ())):
        return []
    if isinstance(widget, widgets.HTML):
        return [widget.value] if widget.value else []
    if isinstance(widget, widgets.Box):
        return [value for child in widget.children for value in _html_values(child)]
    return []
