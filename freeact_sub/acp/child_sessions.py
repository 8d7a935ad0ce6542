"""Subagents as ACP child sessions, for a client that advertised `clientCapabilities.subagents` (ACP v1).

Each subagent gets a session id of its own, `<root session>:<agent id>`. It is announced with a `subagent_update`
on its parent's session (the root session for the main agent's children) before anything else bears its id: its
title (`agent-3fa2 (reviewer)`), its job, that it can be cancelled, and its state (`running`, `requires_action`
while one of its calls waits for a person, `idle` with a stop reason once it ended). Then its own calls and words
are ordinary session updates on its session, its questions permission requests on it; the `task` call that
started it stays in the parent's session and links to it with `session` content. `session/cancel` on a child's
session stops that child only, as `Agent.cancel_subagent` does.

The ACP SDK (0.11) has no types for these, so they are small models of our own, written as JSON lines on the
protocol's stdout (`raw_sender`). A client without the capability gets none of this: the titled tool calls of
`updates.py` only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from freeact_sub import SubagentFinished, SubagentStarted

from .tool_calls import summary

__all__ = ["ChildSessions", "RawSend", "SubagentState", "SubagentUpdate", "advertised", "raw_sender"]

_STOP_REASONS = {"done": "end_turn", "cancelled": "cancelled", "turn_limit": "max_turn_requests", "rejected": "refusal"}
"""A subagent's end as the protocol's stop reason; `failed` has none (the `_meta` says it)."""


def advertised(initialize_params: dict[str, Any] | None) -> bool:
    """Whether the client's `initialize` opted in to child sessions (`clientCapabilities.subagents: {}`)."""
    capabilities = (initialize_params or {}).get("clientCapabilities")
    return isinstance(capabilities, dict) and isinstance(capabilities.get("subagents"), dict)


class SubagentState(BaseModel):
    """A child's foreground work: `running`, `requires_action`, or `idle` (with why it stopped)."""

    state: Literal["running", "idle", "requires_action"]
    stop_reason: str | None = Field(default=None, serialization_alias="stopReason")


class SubagentUpdate(BaseModel):
    """The `subagent_update` session update: announces a child session (the first one) and patches it after."""

    session_update: Literal["subagent_update"] = Field(default="subagent_update", serialization_alias="sessionUpdate")
    session_id: str = Field(serialization_alias="sessionId")
    """The child's session id (the notification's own `sessionId` is its parent's)."""
    title: str | None = None
    description: str | None = None
    capabilities: dict[str, Any] | None = None
    state: SubagentState | None = None
    field_meta: dict[str, Any] | None = Field(default=None, serialization_alias="_meta")

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


RawSend = Callable[[str, dict[str, Any]], Awaitable[None]]
"""Sends one session update as JSON: `(session id, update)`."""


def raw_sender(writer: asyncio.StreamWriter) -> RawSend:
    """Send `session/update`s the SDK's typed `session_update` would refuse (its union knows no `subagent_update`
    and no `session` content) as JSON lines on the protocol's own stdout. Each is one `write` of a whole line, after
    the SDK's earlier updates were written (the session awaits each), so the order holds and nothing interleaves."""

    async def send(session_id: str, update: dict[str, Any]) -> None:
        message = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}
        writer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        await writer.drain()

    return send


class ChildSessions:
    """Which session each agent of one root session's tree speaks on, and the updates that announce children."""

    def __init__(self, root: str, main_id: str) -> None:
        self.root = root
        self.session_of: dict[str, str] = {main_id: root}
        """An agent's id → its session id (the main agent's is the root session)."""
        self.agent_of: dict[str, str] = {}
        """A child session's id → the subagent's id."""
        self.parent_of: dict[str, str] = {}
        """A subagent's id → its parent's id."""
        self.linked: dict[str, str] = {}
        """The ACP id of a `task` call → the child session it started."""

    def session(self, agent_id: str) -> str:
        """The session an agent's updates go on; one not announced (yet) speaks on the root session."""
        return self.session_of.get(agent_id, self.root)

    def target(self, update: Any, agent_id: str) -> str:
        """The session one update goes on: the plan on the root, a call on its agent's (its ACP id names the agent),
        words on the session of the agent that said them."""
        if update.session_update == "plan":
            return self.root
        call = getattr(update, "tool_call_id", None)
        return self.session(call.partition("/")[0] if call else agent_id)

    def announce(self, event: SubagentStarted, task_call: str | None) -> tuple[str, dict[str, Any]]:
        """The child's `subagent_update` (to send on its parent's session, before anything bears its id)."""
        child = f"{self.root}:{event.subagent_id}"
        parent = self.session(event.agent_id)
        self.session_of[event.subagent_id], self.agent_of[child] = child, event.subagent_id
        self.parent_of[event.subagent_id] = event.agent_id
        if task_call is not None:
            self.linked[task_call] = child
        update = SubagentUpdate(
            session_id=child,
            title=f"{event.subagent_id} ({event.agent_type})",
            description=summary(event.description or event.prompt) or None,
            capabilities={"cancel": {}},
            state=SubagentState(state="running"),
            field_meta={
                "freeact-sub": {
                    "agent_id": event.subagent_id,
                    "agent_type": event.agent_type,
                    "model": event.model or None,
                }
            },
        )
        return parent, update.wire()

    def state(self, agent_id: str, state: Literal["running", "requires_action"]) -> tuple[str, dict[str, Any]] | None:
        """A live child's new state, on its parent's session (None for the main agent or an unknown agent)."""
        parent = self.parent_of.get(agent_id)
        if parent is None:
            return None
        update = SubagentUpdate(session_id=self.session_of[agent_id], state=SubagentState(state=state))
        return self.session(parent), update.wire()

    def finished(self, event: SubagentFinished) -> tuple[str, dict[str, Any]] | None:
        """The child ended: `idle`, with its stop reason, on its parent's session."""
        child = self.session_of.get(event.subagent_id)
        if child is None:  # stopped while it was queued: it was never announced
            return None
        self.parent_of.pop(event.subagent_id, None)
        update = SubagentUpdate(
            session_id=child,
            state=SubagentState(state="idle", stop_reason=_STOP_REASONS.get(event.status)),
            field_meta={"freeact-sub": {"status": event.status}},
        )
        return self.session(event.agent_id), update.wire()

    def with_link(self, update: Any, content: list[Any]) -> dict[str, Any] | None:
        """A `task` call's update carrying its whole `content` and, after it, the link to its child session (None for
        any other update): the protocol replaces a call's content, so the link goes with every update of it."""
        child = self.linked.get(getattr(update, "tool_call_id", None) or "")
        if child is None:
            return None
        wire: dict[str, Any] = update.model_dump(mode="json", by_alias=True, exclude_none=True)
        shown = [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in content]
        wire["content"] = [*shown, {"type": "session", "sessionId": child}]
        return wire
