"""`TimelineView`: the run's timeline under its panels, redrawn while the run goes on.

One lane per agent (children under their parent), bars coloured by state with JupyterLab's
theme variables, a bar's hover text naming its state, its call and how long it took. It is an
`HTML` widget, so the static copy of a finished run (`_static.py`) keeps it as it was drawn last.
"""

from __future__ import annotations

import ipywidgets as widgets

from freeact_sub import AgentEvent, Timeline, TimelineBuilder

__all__ = ["TimelineView"]


class TimelineView(widgets.HTML):
    """Collects a run's events (`add`) and draws them (`refresh`, on the run's clock and when it ends)."""

    def __init__(self) -> None:
        super().__init__()
        self.add_class("freeact-timeline")
        self._builder = TimelineBuilder()
        self._seen = 0
        self._drawn = -1
        self.timeline: Timeline | None = None
        """The timeline as it was drawn last (None before the first event)."""

    def add(self, event: AgentEvent) -> None:
        """Take one event of the run into account (drawn at the next `refresh`)."""
        self._builder.add(event)
        self._seen += 1

    def refresh(self, *, force: bool = False) -> None:
        """Draw the timeline as it stands (open spans reach to now); only when something happened, unless `force`."""
        if self._seen == 0 or (self._seen == self._drawn and not force and not self._running()):
            return
        self.timeline = self._builder.build()
        self._drawn = self._seen
        value = self.timeline.to_html()
        if getattr(self, "value", None) != value:
            self.value = value

    def _running(self) -> bool:
        return self.timeline is not None and any(lane.status == "running" for lane in self.timeline.lanes)
