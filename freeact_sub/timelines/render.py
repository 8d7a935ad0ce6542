"""Drawing a timeline: SVG and PNG with matplotlib (imported only here, when a picture is drawn), and HTML.

The HTML form is what the notebook shows: one row per lane, bars placed by their share of the
run, coloured with JupyterLab's theme variables (with fallbacks outside JupyterLab), each bar's
`title` naming its state, its call and how long it took, so hovering shows them.
"""

from __future__ import annotations

import html
import io
import re
from pathlib import Path
from typing import TYPE_CHECKING

from .lanes import SPAN_STATES, Lane, Span, SpanState, TimelineData

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["COLOURS", "STATE_NAMES", "figure", "to_html", "to_png", "to_svg", "write"]

STATE_NAMES: dict[SpanState, str] = {
    "waiting_for_slot": "slot wait",
    "starting": "starting",
    "thinking": "thinking",
    "waiting_for_model": "model slot wait",
    "retrying": "retry wait",
    "compacting": "compacting",
    "waiting_for_approval": "approval wait",
    "running_code": "running code",
    "calling_tool": "tool call",
    "finishing": "finishing",
}
"""The legend's words: short, and not the words the agents' panels use for their states (`waiting for approval`)."""
COLOURS: dict[str, tuple[str, str]] = {
    "waiting_for_slot": ("--jp-layout-color3", "#bdbdbd"),
    "starting": ("--jp-layout-color4", "#757575"),
    "thinking": ("--jp-brand-color1", "#1976d2"),
    "waiting_for_model": ("--jp-layout-color3", "#90a4ae"),
    "retrying": ("--jp-error-color2", "#ef9a9a"),
    "compacting": ("--jp-brand-color4", "#b39ddb"),
    "waiting_for_approval": ("--jp-warn-color1", "#f57c00"),
    "running_code": ("--jp-success-color1", "#388e3c"),
    "calling_tool": ("--jp-info-color1", "#00838f"),
    "finishing": ("--jp-brand-color3", "#9575cd"),
    "done": ("--jp-success-color0", "#1b5e20"),
    "failed": ("--jp-error-color1", "#d32f2f"),
    "cancelled": ("--jp-layout-color4", "#616161"),
    "turn_limit": ("--jp-warn-color0", "#e65100"),
    "rejected": ("--jp-error-color0", "#b71c1c"),
    "running": ("--jp-brand-color2", "#64b5f6"),
}
"""Per state and lane status: the JupyterLab theme variable (HTML) and the colour used without one (SVG, PNG)."""
_FORMATS = {".svg", ".png", ".html", ".htm"}


def lane_name(lane: Lane) -> str:
    """How a lane is labelled: indented by depth, its title and short id."""
    short = lane.agent_id.removeprefix("agent-")[:6]
    return f"{'  ' * lane.depth}{lane.title or 'agent'} ({short})"


def span_text(span: Span, origin: float, now: float) -> str:
    """The hover text of a span: state, call, when and how long."""
    start = span.start - origin
    lasted = span.duration(now)
    open_note = " (still going)" if span.end is None else ""
    text = f"{STATE_NAMES[span.state]}: {start:.2f}s + {lasted:.2f}s{open_note}"
    if span.label:
        text += f"\n{span.label}"
    if span.call:
        text += f"\ncall {span.call}"
    return text


def figure(data: TimelineData) -> Figure:
    """The timeline as a matplotlib `Figure` (not registered with pyplot)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    count = max(1, len(data.lanes))
    used = {span.state for lane in data.lanes for span in lane.spans}
    states = [state for state in SPAN_STATES if state in used or not used]
    height = min(2.0 + 0.32 * count, 80.0)
    fig = Figure(figsize=(11, height), layout="constrained")
    ax = fig.add_subplot()
    origin, now = data.start, data.end
    for row, lane in enumerate(data.lanes):
        for number, span in enumerate(lane.spans):
            ax.barh(
                row,
                span.duration(now),
                left=span.start - origin,
                height=0.62,
                color=COLOURS[span.state][1],
                edgecolor="none",
                gid=f"span-{row}-{number}",
            )
        end = (lane.end if lane.end is not None else now) - origin
        ax.plot(
            [end],
            [row],
            marker="|" if lane.status == "running" else "o",
            markersize=6,
            color=COLOURS[lane.status][1],
            gid=f"status-{row}",
        )
    ax.set_yticks(range(len(data.lanes)), [lane_name(lane) for lane in data.lanes], fontsize=8)
    ax.set_ylim(len(data.lanes) - 0.5, -0.5)
    ax.set_xlim(0, max(data.end - origin, 1e-3) * 1.02)
    ax.set_xlabel("seconds since the run started")
    ax.grid(axis="x", alpha=0.3)
    handles = [Patch(color=COLOURS[state][1], label=STATE_NAMES[state]) for state in states]
    # at most five a row (ten in one row ran past the figure's edge: `fini…`), above the axes, in the layout
    fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 5), fontsize=8, frameon=False)
    return fig


def to_svg(data: TimelineData) -> str:
    """The timeline as an SVG document; each bar has a `<title>` (hover shows its state and call)."""
    buffer = io.StringIO()
    figure(data).savefig(buffer, format="svg")
    svg = buffer.getvalue()
    titles = {
        f"span-{row}-{number}": span_text(span, data.start, data.end)
        for row, lane in enumerate(data.lanes)
        for number, span in enumerate(lane.spans)
    }
    titles.update({f"status-{row}": f"{lane.agent_id}: {lane.status}" for row, lane in enumerate(data.lanes)})

    def with_title(match: re.Match[str]) -> str:
        text = titles.get(match.group(1))
        return match.group(0) if text is None else f"{match.group(0)}<title>{html.escape(text)}</title>"

    return re.sub(r'<g id="((?:span|status)-[0-9-]+)">', with_title, svg)


def to_png(data: TimelineData, dpi: int = 110) -> bytes:
    """The timeline as PNG bytes."""
    buffer = io.BytesIO()
    figure(data).savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def _colour(key: str) -> str:
    """The theme's colour in the form the notebook's static copy uses for an untrusted notebook's sanitizer.

    `background-color: color-mix(…)` holding the variable (see `notebook/_style.py`); the browser test checks
    that the bars keep their colours in an untrusted notebook.
    """
    variable, fallback = COLOURS[key]
    return f"color-mix(in srgb, var({variable}, {fallback}) 100%, transparent)"


def to_html(data: TimelineData, *, document: bool = False) -> str:
    """The timeline as HTML (a fragment for a widget; `document=True` for a file of its own).

    Styles are inline (no `<style>` block), so the fragment shows the same wherever it is
    pasted, and its plain text is only what it says.
    """
    origin = data.start
    total = max(data.end - origin, 1e-6)
    rows = []
    for lane in data.lanes:
        bars = []
        for span in lane.spans:
            left = 100 * (span.start - origin) / total
            width = max(100 * span.duration(data.end) / total, 0.15)
            bars.append(
                f'<div class="fs-tl-bar" data-state="{span.state}" data-call="{html.escape(span.call or "")}" '
                f'title="{html.escape(span_text(span, origin, data.end))}" '
                f'style="{_BAR}left:{left:.3f}%;width:{width:.3f}%;background-color:{_colour(span.state)}"></div>'
            )
        end = 100 * ((lane.end if lane.end is not None else data.end) - origin) / total
        bars.append(
            f'<div class="fs-tl-end" data-status="{lane.status}" title="{html.escape(lane.status)}" '
            f'style="{_END}left:calc({end:.3f}% - 3px);background-color:{_colour(lane.status)}"></div>'
        )
        rows.append(
            f'<div class="fs-tl-lane" data-agent="{html.escape(lane.agent_id)}" data-depth="{lane.depth}" '
            f'data-status="{lane.status}" style="{_LANE}">'
            f'<div class="fs-tl-name" style="{_NAME}padding-left:{0.8 * lane.depth:.1f}em" '
            f'title="{html.escape(lane.agent_id)}">{html.escape(lane_name(lane).strip())}</div>'
            f'<div class="fs-tl-track" style="{_TRACK}">{"".join(bars)}</div></div>'
        )
    shown = {span.state for lane in data.lanes for span in lane.spans}  # a one-cell run needs no ten-state legend
    legend = "".join(
        f'<span style="margin-right:1em;white-space:nowrap"><i style="{_KEY}background-color:{_colour(state)}"></i>'
        f"{STATE_NAMES[state]}</span>"
        for state in SPAN_STATES
        if state in shown
    )
    body = (
        f'<div class="fs-timeline" data-lanes="{len(data.lanes)}" style="{_BOX}">'
        f'<div class="fs-tl-legend" style="margin-bottom:4px">{legend}</div>{"".join(rows)}'
        f'<div class="fs-tl-axis" style="{_AXIS}"><span>0 s</span><span>{total:.2f} s</span></div></div>'
    )
    if not document:
        return body
    head = '<meta charset="utf-8"><title>freeact-sub timeline</title>'
    return f"<!doctype html><html><head>{head}</head><body>{body}</body></html>"


_BOX = (
    "font-family:var(--jp-ui-font-family,sans-serif);font-size:var(--jp-ui-font-size1,12px);"
    "color:color-mix(in srgb, var(--jp-ui-font-color1,#212121) 100%, transparent);margin:6px 0;"
)
_LANE = "display:flex;align-items:center;height:16px;margin:1px 0;"
_NAME = "flex:0 0 16em;overflow:hidden;white-space:nowrap;text-overflow:ellipsis;"
_TRACK = (
    "position:relative;flex:1 1 auto;height:12px;"
    "background-color:color-mix(in srgb, var(--jp-layout-color2,#f5f5f5) 100%, transparent);"
)
_BAR = "position:absolute;top:0;height:12px;"
_END = "position:absolute;top:3px;width:6px;height:6px;border-radius:3px;"
_KEY = "display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle;"
_AXIS = (
    "display:flex;justify-content:space-between;margin-left:16em;"
    "color:color-mix(in srgb, var(--jp-ui-font-color2,#616161) 100%, transparent);"
)


def write(data: TimelineData, path: Path | str) -> Path:
    """Draw the timeline into `path`; its suffix picks the format (`.svg`, `.png`, `.html`). Returns the full path."""
    target = Path(path).expanduser().resolve()
    suffix = target.suffix.lower()
    if suffix not in _FORMATS:
        raise ValueError(f"cannot draw a timeline as {target.name!r}: name a .svg, .png or .html file")
    if suffix == ".png":
        target.write_bytes(to_png(data))
    elif suffix == ".svg":
        target.write_text(to_svg(data), encoding="utf-8")
    else:
        target.write_text(to_html(data, document=True), encoding="utf-8")
    return target
