"""Where things go in a run's widget tree so that a question waiting for a click never moves.

A person reads a run top to bottom and clicks the card in front of them. Whatever is inserted above a
waiting card (a subagent's panel, under the `task` call that started it) or taken away above it (the
buttons of the card just answered) moves it under the pointer, and a quick second click lands on
another question. The run asks these helpers before it inserts or removes anything.
"""

from __future__ import annotations

from collections.abc import Iterator

import ipywidgets as widgets

from .call_view import CallView

__all__ = ["document_order", "waits_after"]


def document_order(root: widgets.Widget) -> Iterator[widgets.Widget]:
    """`root` and every widget under it, in the order a person reads them (depth first, top to bottom)."""
    stack = [root]  # a stack, not nested generators: a run of 50 subagents is walked at every decision
    while stack:
        widget = stack.pop()
        yield widget
        stack.extend(reversed(getattr(widget, "children", ())))


def waits_after(root: widgets.Widget, anchor: widgets.Widget) -> bool:
    """Whether a question waits below `anchor` (and outside it) in `root`'s tree."""
    order = list(document_order(root))
    try:
        start = order.index(anchor)
    except ValueError:
        return False
    end = start + sum(1 for _ in document_order(anchor))
    return any(isinstance(widget, CallView) and widget.pending for widget in order[end:])


def release_answered(root: widgets.Widget) -> None:
    """Take away the inert buttons of answered cards below which no question waits any more."""
    waiting_below = False
    for widget in reversed(list(document_order(root))):
        if not isinstance(widget, CallView):
            continue
        if widget.keeps_place and not waiting_below:
            widget.give_up_place()
        waiting_below = waiting_below or widget.pending
