"""A static copy of a run's widgets: HTML and plain text that show without a live kernel.

A saved notebook keeps only a reference to widget models, which are gone once the kernel is;
without this copy a reopened notebook shows "Error displaying widget: model not found" for
each run. The copy walks the widget tree, so whatever a panel shows (and whatever later code
adds to it) is copied: `HTML` widgets keep their markup and CSS classes, boxes become `div`s
laid out like them, images are embedded, and controls that only act in a live session
(buttons, the standing-decision checkbox, the reason box) are left out.
"""

from __future__ import annotations

import base64
import html
import re

import ipywidgets as widgets

from ._style import static_stylesheet

__all__ = ["static_html", "static_text"]

_SKIPPED = (widgets.Button, widgets.Checkbox, widgets.Text)
_SKIPPED_CLASSES = {"freeact-stylesheet", "freeact-live"}
_TAG = re.compile(r"<[^>]+>")
_BLOCK_END = re.compile(r"</(p|div|pre|h[1-6]|li|tr)>|<br\s*/?>")


def static_html(root: widgets.Widget) -> str:
    """The widget tree under `root` as one self-contained HTML block (stylesheet included)."""
    return f'{static_stylesheet()}<div class="freeact-static">{_html(root)}</div>'


def static_text(root: widgets.Widget) -> str:
    """What the widget tree shows, as plain text (for front ends without HTML)."""
    lines: list[str] = []
    for value in _html_values(root):
        text = html.unescape(_TAG.sub("", _BLOCK_END.sub("\n", value)))
        lines.extend(line.rstrip() for line in text.splitlines() if line.strip())
    return "\n".join(lines)


def _classes(widget: widgets.Widget) -> str:
    return " ".join(c for c in getattr(widget, "_dom_classes", ()) if c not in _SKIPPED_CLASSES)


def _html(widget: widgets.Widget) -> str:
    if isinstance(widget, _SKIPPED) or "freeact-stylesheet" in getattr(widget, "_dom_classes", ()):
        return ""
    if isinstance(widget, widgets.HTML):
        return f'<div class="{_classes(widget)}">{widget.value}</div>' if widget.value else ""
    if isinstance(widget, widgets.Image):
        encoded = base64.b64encode(bytes(widget.value)).decode("ascii")
        return f'<img class="{_classes(widget)}" src="data:image/{widget.format};base64,{encoded}">'
    if isinstance(widget, widgets.Box):
        kind = "freeact-hbox" if isinstance(widget, widgets.HBox) else "freeact-vbox"
        inner = "".join(_html(child) for child in widget.children)
        return f'<div class="{kind} {_classes(widget)}">{inner}</div>' if inner else ""
    return ""


def _html_values(widget: widgets.Widget) -> list[str]:
    if isinstance(widget, _SKIPPED) or "freeact-stylesheet" in getattr(widget, "_dom_classes", ()):
        return []
    if isinstance(widget, widgets.HTML):
        return [widget.value] if widget.value else []
    if isinstance(widget, widgets.Box):
        return [value for child in widget.children for value in _html_values(child)]
    return []
