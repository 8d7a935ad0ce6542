"""What the live view showed beyond a transcript (`shown.jsonl`), as the events a replay adds.

How each call was decided and by whom (a `SavedDecision` follows its `ApprovalRequest`), and the MCP
calls a cell's code made (their requests, decisions and results). A session saved before that file
existed replays without them.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..events import AgentEvent, ApprovalRequest, Rewound, ToolOutput

__all__ = [
    "DecidedBy",
    "SavedDecision",
    "Shown",
    "code_calls",
    "decided_request",
    "did_not_run",
    "read_shown",
    "request_from",
    "rewind_record",
    "rewound_after",
    "rewound_event",
    "saved_decision",
]


DecidedBy = Literal["person", "auto", "standing", "rule", "hook", "cancelled", "pending"]


@dataclass(frozen=True, kw_only=True)
class SavedDecision(AgentEvent):
    """How a call was decided, as saved when it happened; it follows its `ApprovalRequest` in a replay.

    `by`: `person`; `auto` (a standing decision covered the agent when it asked); `standing` (one
    made while it waited; `covered`); `rule` or `hook` (nobody was asked); `cancelled` (the turn
    or the agent was stopped before anyone answered; `stopped_by` says who stopped the agent);
    `pending` (nothing was saved: the session ended while the question was open).
    """

    tool_call_id: str
    by: DecidedBy
    approved: bool | None = None
    reason: str | None = None
    always: Literal["agent", "all"] | None = None
    """For a person's approval: the standing decision given with it (this agent from now on, or every agent)."""
    covered: bool = False
    """For `standing`: it was first asked, then a standing decision made for another question covered it."""
    stopped_by: str | None = None


@dataclass
class Shown:
    """What `shown.jsonl` saved of one agent: decisions by call id, and the MCP calls of each cell."""

    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    code_calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """By the cell's call id: its calls' decision records and results, in the order they happened."""
    rewinds: list[dict[str, Any]] = field(default_factory=list)
    """Its rewinds (`rewind_record`), in the order they happened."""


def read_shown(path: Path) -> dict[str, Shown] | None:
    """The `shown.jsonl` of a session folder by agent id; None for a session saved before the file existed."""
    file = path / "shown.jsonl"
    if not file.exists():
        return None
    found: dict[str, Shown] = {}
    for line in file.read_bytes().splitlines():
        try:
            record = json.loads(line)
            agent, call = record["agent_id"], record["call"]
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line: what it said is lost, the rest stands
        shown = found.setdefault(agent, Shown())
        if record.get("cell"):
            shown.code_calls.setdefault(record["cell"], []).append(record)
        if record.get("kind") == "decision":
            shown.decisions[call] = record
        elif record.get("kind") == "rewind":
            shown.rewinds.append(record)
    return found


def rewind_record(event: Rewound, kept: int) -> dict[str, Any]:
    """What `shown.jsonl` keeps of a rewind: the event, and how many messages of the conversation it kept."""
    return {"kind": "rewind", "call": f"rewind-{event.undo}", "kept": kept, "checkpoint": event.checkpoint,
            "undo": event.undo, "restored": list(event.restored), "removed": list(event.removed),
            "failed": [list(pair) for pair in event.failed], "messages_removed": event.messages_removed,
            "kernel_restarted": event.kernel_restarted, "at": event.at}


def rewound_after(record: dict[str, Any]) -> int:
    """How many messages of the conversation the saved rewind kept: it is shown after them."""
    kept = record.get("kept")
    return kept if isinstance(kept, int) and kept >= 0 else 0


def rewound_event(agent_id: str, record: dict[str, Any]) -> Rewound:
    """The `Rewound` event a saved rewind record stands for (a record from a file, so every field is checked)."""

    def names(key: str) -> tuple[str, ...]:
        value = record.get(key)
        return tuple(str(item) for item in value) if isinstance(value, list) else ()

    failed = tuple((str(pair[0]), str(pair[1])) for pair in record.get("failed") or ()
                   if isinstance(pair, list) and len(pair) == 2)
    number = lambda key: value if isinstance(value := record.get(key), int) else 0  # noqa: E731
    at = record.get("at")
    return Rewound(agent_id=agent_id, checkpoint=number("checkpoint"), undo=number("undo"), restored=names("restored"),
                   removed=names("removed"), failed=failed, messages_removed=number("messages_removed"),
                   kernel_restarted=record.get("kernel_restarted") is not False,
                   **({"at": float(at)} if isinstance(at, int | float) else {}))


def saved_decision(agent_id: str, call_id: str, record: dict[str, Any] | None, at: float) -> SavedDecision:
    """How the call `call_id` was decided, from its saved `record` (None: nothing saved, `pending`)."""
    if record is None:
        return SavedDecision(agent_id=agent_id, tool_call_id=call_id, by="pending", at=at)
    by = record.get("by")
    always = record.get("always")
    return SavedDecision(
        agent_id=agent_id, tool_call_id=call_id,
        by=by if by in ("person", "auto", "standing", "rule", "hook", "cancelled") else "person",
        approved=record.get("approved"), reason=record.get("reason"),
        always=always if always in ("agent", "all") else None, covered=bool(record.get("covered")),
        stopped_by=record.get("stopped_by"), at=at,
    )


def request_from(agent_id: str, name: str, args: dict[str, Any], call_id: str, record: dict[str, Any] | None,
                  ran: bool, asked: float, decided: float) -> ApprovalRequest:
    """The request as the live stream emitted it: its source, rule and hook, decided as it was."""
    if record is None:
        return decided_request(agent_id, name, args, call_id, ran, asked, decided)
    approved = bool(record.get("approved"))
    return decided_request(
        agent_id, str(record.get("tool") or name), dict(record.get("args") or args), call_id, approved, asked, decided,
        reason=record.get("reason"), auto=approved and record.get("by") in ("auto", "rule", "hook"),
        rule=record.get("rule"), hook=record.get("hook"), source="code" if record.get("source") == "code" else "model",
        cell=record.get("cell"),
    )


_loop: asyncio.AbstractEventLoop | None = None


_NOT_RUN = ("The user rejected", "The user interrupted the turn before this call ran", "An approval rule refused",
            "A hook (")
"""How the results of calls that never ran begin: rejected, stopped before they ran, refused by a rule or a hook."""


def did_not_run(result: str) -> bool:
    """Whether a call's saved result says it never ran (it is replayed as not approved)."""
    return result.startswith(_NOT_RUN)


def decided_request(
    agent_id: str, name: str, args: dict[str, Any], call_id: str, approved: bool, asked: float, decided: float, *,
    reason: str | None = None, auto: bool = False, rule: str | None = None, hook: str | None = None,
    source: Literal["model", "code"] = "model", cell: str | None = None,
) -> ApprovalRequest:
    """An `ApprovalRequest` that was decided long ago (no event loop needs to run for it)."""
    global _loop
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        if _loop is None:
            _loop = asyncio.new_event_loop()  # never run: it only owns the futures of replayed requests
        loop = _loop
    decision: asyncio.Future[bool] = loop.create_future()
    decision.set_result(approved)
    request = ApprovalRequest(agent_id=agent_id, tool_name=name, tool_args=args, tool_call_id=call_id,
                              auto_approved=auto, rule=rule, hook=hook, source=source, cell_call_id=cell,
                              _decision=decision, at=asked)
    request.approve(approved, reason, at=decided)
    return request




def code_calls(agent_id: str, records: list[dict[str, Any]], at: float) -> list[AgentEvent]:
    """The MCP calls a cell's code made, as they were shown: each request, its decision, its result (at `at`, the
    cell's end: their own times are not saved)."""
    events: list[AgentEvent] = []
    for record in records:
        call_id, cell = str(record.get("call")), record.get("cell")
        if record.get("kind") == "decision":
            name, args = str(record.get("tool") or ""), dict(record.get("args") or {})
            events.append(request_from(agent_id, name, args, call_id, record, bool(record.get("approved")), at, at))
            events.append(saved_decision(agent_id, call_id, record, at))
        elif record.get("kind") == "code_result":
            events.append(ToolOutput(agent_id=agent_id, content=str(record.get("content") or ""),
                                     tool_name=str(record.get("tool") or ""), tool_call_id=call_id,
                                     is_error=bool(record.get("is_error")), source="code",
                                     cell_call_id=str(cell) if cell else None, at=at))
    return events
