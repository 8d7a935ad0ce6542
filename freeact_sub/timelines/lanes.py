"""Lanes and states of a run, computed from its events.

One lane per agent, children right after their parent (depth first, in the order they were
started). A lane is a list of spans, each in one state and, where it belongs to a tool call,
knowing that call:

    waiting_for_slot       a `task` call's child waits until fewer than `max_subagents` run
    starting               the child took its slot and is being set up until it first acts; and a first cell's
                           wait for the child's kernel, which boots beside its first model request
    thinking               a model request is out: from `TurnStarted` until the response is complete
    waiting_for_model      a model request waits for a slot: the tree has `max_model_requests` in flight
    retrying               a model request failed before it acted and waits to be sent again (`ModelRetry`)
    compacting             the history is being compacted: the kernel's names, the summary request (`ContextCompacted`)
    waiting_for_approval   an `ApprovalRequest` nobody has decided yet
    running_code           an approved `execute_ipython_cell` call, until its output is complete
    calling_tool           any other approved call (an MCP tool, `reset_kernel`, a `task` running its child)
    finishing              a child gave its final answer and is being shut down until its `SubagentFinished`

A lane ends `done`, `failed`, `cancelled`, `turn_limit` or `rejected` (a child, as its
`SubagentFinished` said; the main agent: `done` after its final answer, `cancelled` after
`RunCancelled`), or is still `running`.

Events carry the time they happened (`AgentEvent.at`), and an `ApprovalRequest` the time it was
decided (`decided_at`), so the same builder serves a live run (feed it events as they come) and
a saved session (its replayed events carry the saved times).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from ..events import (
    AgentEvent,
    ApprovalRequest,
    CodeExecutionOutput,
    ContextCompacted,
    ModelRetry,
    ModelSlot,
    ModelUsage,
    Response,
    RunCancelled,
    SubagentFinished,
    SubagentQueued,
    SubagentStarted,
    Thoughts,
    ToolOutput,
    TurnStarted,
)
from ..events.batches import batch_row, row_input

__all__ = ["SPAN_STATES", "Lane", "LaneStatus", "Span", "SpanState", "TimelineBuilder", "TimelineData", "job_title"]

SpanState = Literal[
    "waiting_for_slot", "starting", "thinking", "waiting_for_model", "retrying", "compacting", "waiting_for_approval",
    "running_code", "calling_tool", "finishing",
]
SPAN_STATES: tuple[SpanState, ...] = (
    "waiting_for_slot",
    "starting",
    "thinking",
    "waiting_for_model",
    "retrying",
    "compacting",
    "waiting_for_approval",
    "running_code",
    "calling_tool",
    "finishing",
)
"""Every span state, in the order a legend lists them."""
LaneStatus = Literal["running", "done", "failed", "cancelled", "turn_limit", "rejected"]


@dataclass(kw_only=True)
class Span:
    """A stretch of time one agent spent in one state."""

    state: SpanState
    start: float
    """Seconds since the epoch."""
    end: float | None = None
    """None while it lasts (a live run)."""
    call: str | None = None
    """The `tool_call_id` of the call it belongs to (for a child's slot wait and start: the parent's `task` call)."""
    label: str = ""
    """What a person reads on hover: the tool and the gist of its arguments."""

    def duration(self, now: float | None = None) -> float:
        """Seconds it lasted (so far, for one still open: until `now`, default the current time)."""
        end = self.end if self.end is not None else (now if now is not None else time.time())
        return max(0.0, end - self.start)

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "start": self.start, "end": self.end, "call": self.call, "label": self.label}


@dataclass(kw_only=True)
class Lane:
    """One agent's row in the timeline."""

    agent_id: str
    parent_id: str | None = None
    depth: int = 0
    """0 for the main agent, 1 for its children, and so on."""
    title: str = ""
    """The agent's type and the `task` call's description, for a child; `main` for the main agent."""
    start: float = 0.0
    end: float | None = None
    """When it ended; None while it runs."""
    status: LaneStatus = "running"
    spans: list[Span] = field(default_factory=list)

    def states(self) -> list[SpanState]:
        """The states of its spans, in order of their start."""
        return [span.state for span in sorted(self.spans, key=lambda s: s.start)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "parent_id": self.parent_id,
            "depth": self.depth,
            "title": self.title,
            "start": self.start,
            "end": self.end,
            "status": self.status,
            "spans": [span.to_dict() for span in sorted(self.spans, key=lambda s: s.start)],
        }


@dataclass(kw_only=True)
class TimelineData:
    """The lanes of a run: the parent first, each child right after it (depth first)."""

    lanes: list[Lane]
    start: float
    """The earliest moment of any lane (seconds since the epoch)."""
    end: float
    """The latest moment seen (for a live run: when this picture was taken)."""

    def lane(self, agent_id: str) -> Lane:
        """The lane of one agent; `KeyError` if it has none."""
        for lane in self.lanes:
            if lane.agent_id == agent_id:
                return lane
        raise KeyError(agent_id)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready): times are seconds since the epoch."""
        return {"start": self.start, "end": self.end, "lanes": [lane.to_dict() for lane in self.lanes]}


def job_title(event: SubagentQueued | SubagentStarted, words: int = 6) -> str:
    """What a subagent's lane says its job is: the `task` call's title, or the first words of its prompt."""
    if event.description:
        return event.description
    first = event.prompt.split()
    return " ".join(first[:words]) + (" …" if len(first) > words else "")


def call_label(request: ApprovalRequest) -> str:
    """A one-line description of a call: `execute_ipython_cell: print(1)`, `task: summarise the logs`."""
    args = request.tool_args
    if request.tool_name == "execute_ipython_cell":
        gist = str(args.get("code", ""))
    elif request.tool_name == "task":
        gist = str(args.get("description") or args.get("prompt") or "")
    else:
        gist = ", ".join(f"{key}={value!r}" for key, value in args.items())
    gist = " ".join(gist.split())
    if len(gist) > 120:
        gist = gist[:119] + "…"
    return f"{request.tool_name}: {gist}" if gist else request.tool_name


class TimelineBuilder:
    """Turns events into lanes; feed it a run's events in order (`add`), take a picture any time (`build`)."""

    def __init__(self) -> None:
        self._lanes: dict[str, Lane] = {}
        self._children: dict[str, list[str]] = {}
        self._requests: dict[str, dict[str, ApprovalRequest]] = {}
        """Approval requests by agent and call, read when a picture is taken: a live one may be decided later."""
        self._ended: dict[tuple[str, str], float] = {}
        """When each call's result arrived, by (agent, call)."""
        self._kernel_waits: dict[tuple[str, str], float] = {}
        """Seconds a cell waited for its agent's kernel before it ran, by (agent, call)."""
        self._open: dict[tuple[str, SpanState], Span] = {}
        """The open span of each agent per state that is not tied to a call (thinking, starting)."""
        self._latest = 0.0

    def add(self, event: AgentEvent) -> None:
        """Take one event into account."""
        at = event.at
        self._latest = max(self._latest, at)
        lane = self._lane(event.agent_id, at)
        if not isinstance(event, SubagentQueued | SubagentStarted | SubagentFinished):
            self._close(event.agent_id, "starting", at)  # the child acts: it is set up
        match event:
            case TurnStarted():
                if lane.parent_id is None:
                    lane.status, lane.end = "running", None  # the main agent's next turn
                self._close(event.agent_id, "thinking", at)
                self._open_span(event.agent_id, Span(state="thinking", start=at))
            case ModelRetry():
                self._close(event.agent_id, "thinking", at)
                lane.spans.append(Span(state="retrying", start=at, end=at + event.wait,
                                       label=f"attempt {event.attempt}/{event.attempts} · {event.reason}"))
                self._open_span(event.agent_id, Span(state="thinking", start=at + event.wait))
            case ContextCompacted():
                began = event.started or at
                for span in lane.spans:  # the summary request's usage closed the round's thinking late
                    if span.state == "thinking" and span.end is not None and span.end > began:
                        span.end = max(span.start, began)
                self._close(event.agent_id, "thinking", began)
                lane.spans.append(Span(state="compacting", start=began, end=at, label=event.reason +
                                       f": {event.tokens_before:,} → {event.tokens_after:,} tokens"))
                if event.trigger != "manual":  # within a turn: its round goes on
                    self._open_span(event.agent_id, Span(state="thinking", start=at))
            case ModelSlot(waiting=True):
                self._close(event.agent_id, "thinking", at)
                self._open_span(event.agent_id, Span(state="waiting_for_model", start=at,
                                                     label=f"{event.limit} model requests in flight"))
            case ModelSlot():
                self._close(event.agent_id, "waiting_for_model", at)
                self._close(event.agent_id, "thinking", at)
                self._open_span(event.agent_id, Span(state="thinking", start=at))
            case ModelUsage() | Thoughts() | ApprovalRequest():
                self._close(event.agent_id, "thinking", at)
                if isinstance(event, ApprovalRequest):
                    self._requests.setdefault(event.agent_id, {})[event.tool_call_id] = event
            case Response():
                self._close(event.agent_id, "thinking", at)
                if event.final and lane.parent_id is None:
                    lane.status, lane.end = "done", at
                elif event.final and lane.status == "running":
                    self._open_span(event.agent_id, Span(state="finishing", start=at))
            case CodeExecutionOutput() | ToolOutput():
                self._ended.setdefault((event.agent_id, event.tool_call_id), at)
                if isinstance(event, CodeExecutionOutput) and event.kernel_wait > 0:
                    self._kernel_waits[(event.agent_id, event.tool_call_id)] = event.kernel_wait
            case SubagentQueued():
                child = self._child(event.agent_id, event.subagent_id, at, event.agent_type, self._job(event))
                child.spans.append(_task_span("waiting_for_slot", at, event))
            case SubagentStarted():
                child = self._child(event.agent_id, event.subagent_id, at, event.agent_type, self._job(event))
                for span in child.spans:
                    if span.state == "waiting_for_slot" and span.end is None:
                        span.end = at
                self._open_span(event.subagent_id, _task_span("starting", at, event))
            case SubagentFinished():
                child = self._child(event.agent_id, event.subagent_id, at, "general", "")
                child.status, child.end = event.status, at
                self._close_all(event.subagent_id, at)
            case RunCancelled():
                lane.status = "cancelled"
                lane.end = at
                self._close_all(event.agent_id, at)
            case _:
                pass

    def build(self, now: float | None = None) -> TimelineData:
        """The lanes as they stand: spans still open end at None; `now` (default: the latest event) ends the picture."""
        lanes: list[Lane] = []
        for agent_id, lane in self._lanes.items():
            if lane.parent_id is None or lane.parent_id not in self._lanes:
                self._walk(agent_id, 0, lanes)
        end = now if now is not None else self._latest
        for lane in lanes:
            end = max(end, lane.end or 0.0, *(s.end or 0.0 for s in lane.spans))
        start = min((lane.start for lane in lanes), default=end)
        return TimelineData(lanes=lanes, start=start, end=end)

    # -- inside ------------------------------------------------------------------------------

    def _walk(self, agent_id: str, depth: int, into: list[Lane]) -> None:
        lane = self._lanes[agent_id]
        into.append(self._picture(lane, depth))
        for child in self._children.get(agent_id, []):
            self._walk(child, depth + 1, into)

    def _picture(self, lane: Lane, depth: int) -> Lane:
        """A copy of a lane with the spans of its calls worked out from their requests as they stand now."""
        spans = [Span(**span.to_dict()) for span in lane.spans]
        agent_id = lane.agent_id
        for call, request in self._requests.get(agent_id, {}).items():
            label = call_label(request)
            decided = request.decided_at
            ended = self._ended.get((agent_id, call))
            if decided is None or decided > request.at:
                waited_until = decided if decided is not None else ended
                spans.append(
                    Span(state="waiting_for_approval", start=request.at, end=waited_until, call=call, label=label)
                )
            if decided is None or request.decision is False:
                continue
            state: SpanState = "running_code" if request.tool_name == "execute_ipython_cell" else "calling_tool"
            end = ended if ended is not None else (lane.end if lane.status != "running" else None)
            start = max(decided, request.at)
            if kernel_wait := self._kernel_waits.get((agent_id, call), 0.0):  # a child's kernel was still booting
                spans.append(Span(state="starting", start=start, end=start + kernel_wait, call=call, label=label))
                start += kernel_wait
            spans.append(Span(state=state, start=start, end=end, call=call, label=label))
        spans.sort(key=lambda s: s.start)
        return Lane(
            agent_id=lane.agent_id,
            parent_id=lane.parent_id,
            depth=depth,
            title=lane.title,
            start=lane.start,
            end=lane.end,
            status=lane.status,
            spans=spans,
        )

    def _job(self, event: SubagentQueued | SubagentStarted) -> str:
        """A lane's job: a batch's row by its number and its own input (its rows share the template's words)."""
        found = batch_row(event.tool_call_id)
        question = self._requests.get(event.agent_id, {}).get(found[0]) if found else None
        if found is None or question is None:
            return job_title(event)
        return f"row {found[1]}: {row_input(str(question.tool_args.get('prompt', '')), event.prompt)}"

    def _lane(self, agent_id: str, at: float) -> Lane:
        lane = self._lanes.get(agent_id)
        if lane is None:
            lane = self._lanes[agent_id] = Lane(agent_id=agent_id, title="main", start=at)
        return lane

    def _child(self, parent: str, child_id: str, at: float, kind: str, description: str) -> Lane:
        lane = self._lanes.get(child_id)
        if lane is None:
            lane = self._lanes[child_id] = Lane(agent_id=child_id, start=at)
        if lane.parent_id is None:
            lane.parent_id = parent
            self._children.setdefault(parent, []).append(child_id)
        if not lane.title or lane.title == "main":
            lane.title = f"{kind}: {description}" if description else kind
        lane.start = min(lane.start, at)
        return lane

    def _open_span(self, agent_id: str, span: Span) -> None:
        self._lanes[agent_id].spans.append(span)
        self._open[(agent_id, span.state)] = span

    def _close(self, agent_id: str, state: SpanState, at: float) -> None:
        span = self._open.pop((agent_id, state), None)
        if span is not None:
            span.end = max(span.start, at)

    def _close_all(self, agent_id: str, at: float) -> None:
        for state in SPAN_STATES:
            self._close(agent_id, state, at)
        for span in self._lanes[agent_id].spans:
            if span.end is None:
                span.end = max(span.start, at)
        for call in self._requests.get(agent_id, {}):  # decided or not, none of its calls runs on after its agent
            self._ended.setdefault((agent_id, call), at)


def _task_span(state: SpanState, at: float, event: SubagentQueued | SubagentStarted) -> Span:
    """A child's span from its `task` call's event, labelled with the job's title (or its prompt's start)."""
    return Span(state=state, start=at, call=event.tool_call_id, label=f"task: {event.description or event.prompt[:80]}")
