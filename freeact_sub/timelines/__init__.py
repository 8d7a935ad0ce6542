"""A picture of who did what when: the lanes of a run, from its events or a saved session.

    from freeact_sub import timeline

    events = [event async for event in agent.stream("...")]
    picture = timeline(events)                  # or timeline(open_session("latest"))
    for lane in picture.lanes:                  # one per agent, children after their parent
        print(lane.agent_id, lane.status, [(s.state, s.duration()) for s in lane.spans])
    picture.save("timeline.svg")                # or .png, .html

The states are listed in `lanes.py`; drawing is in `render.py` (matplotlib, loaded only to draw).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from . import render
from .lanes import SPAN_STATES, Lane, LaneStatus, Span, SpanState, TimelineData
from .lanes import TimelineBuilder as _LaneBuilder

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..events import AgentEvent

__all__ = ["SPAN_STATES", "Lane", "LaneStatus", "Span", "SpanState", "Timeline", "TimelineBuilder", "timeline"]


class Timeline(TimelineData):
    """The lanes of a run, and the ways to draw them."""

    def figure(self) -> Figure:
        """A matplotlib `Figure` of the timeline (to adjust or save in other formats)."""
        return render.figure(self)

    def to_svg(self) -> str:
        """An SVG document; hovering a bar shows its state, its call and how long it took."""
        return render.to_svg(self)

    def to_png(self) -> bytes:
        """PNG bytes."""
        return render.to_png(self)

    def to_html(self, *, document: bool = False) -> str:
        """HTML coloured with JupyterLab's theme (a fragment, or a whole page with `document=True`)."""
        return render.to_html(self, document=document)

    def save(self, path: Path | str) -> Path:
        """Draw the timeline into a `.svg`, `.png` or `.html` file; `ValueError` for another suffix."""
        return render.write(self, path)

    def _repr_html_(self) -> str:
        return self.to_html()


class TimelineBuilder(_LaneBuilder):
    """Builds a timeline while a run goes on: `add(event)` each event, `build()` whenever a picture is wanted."""

    def build(self, now: float | None = None) -> Timeline:
        """The lanes so far; spans still going are open (`end` None).

        The picture ends at `now`; by default at the current time while an agent runs, else at the latest event.
        """
        data = super().build(now)
        if now is None and any(lane.status == "running" for lane in data.lanes):
            data = super().build(time.time())
        return Timeline(lanes=data.lanes, start=data.start, end=data.end)


class _Saved(Protocol):
    """What a saved session offers (`freeact_sub.sessions.SavedSession`)."""

    def events(self, agent_id: str | None = None, *, children: bool = True) -> list[AgentEvent]: ...

    @property
    def agents(self) -> dict[str, Any]: ...

    @property
    def main_id(self) -> str: ...


def timeline(source: Iterable[AgentEvent] | _Saved) -> Timeline:
    """The timeline of a run: from the events of `Agent.stream()` (in the order they came) or a saved session.

    A saved session's events carry the times saved with its messages; its slot waits are shown
    as part of `starting` (the session keeps when a `task` call started and when its child
    first asked its model, not when the child took its slot).
    """
    if isinstance(source, str | bytes | Path):
        raise TypeError(
            "timeline() takes events or a saved session, not a name: timeline(open_session(id)) "
            "with `from freeact_sub.sessions import open_session`"
        )
    builder = _LaneBuilder()
    saved = hasattr(source, "main_id") and hasattr(source, "events")
    events: Iterable[AgentEvent] = source.events() if saved else source  # type: ignore[union-attr,assignment]
    count = 0
    for event in events:
        if not hasattr(event, "agent_id") or not hasattr(event, "at"):
            raise TypeError(f"timeline() takes AgentEvents (as Agent.stream() yields them), not {type(event).__name__}")
        builder.add(event)
        count += 1
    if count == 0:
        raise ValueError("no events: a timeline needs the events of a run (or a saved session with messages)")
    data = builder.build()
    if saved:
        main = data.lanes[0] if data.lanes else None
        status = source.agents.get(source.main_id) if main is not None else None  # type: ignore[union-attr]
        if main is not None and status is not None and status.status in ("failed", "cancelled"):
            main.status = status.status
    return Timeline(lanes=data.lanes, start=data.start, end=data.end)
