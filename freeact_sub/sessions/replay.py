"""A saved transcript as the events a live `stream()` produced, so the same renderers show it.

What a transcript keeps is what the model saw: prompts, thinking, text, tool calls and their
results. Streamed text chunks are not kept (their complete forms are); a cell's output is the
text the model received, replayed as one chunk and the complete output; a `task` call's child
is replayed from its own transcript, framed by `SubagentStarted` / `SubagentFinished` as it
was live. A user prompt, which a live stream does
not repeat, becomes a `UserPrompt` event.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..events import (
    AgentEvent,
    ApprovalRequest,
    CodeExecutionOutput,
    CodeExecutionOutputChunk,
    Response,
    SubagentFinished,
    SubagentStarted,
    SubagentStatus,
    Thoughts,
    ToolOutput,
    TurnStarted,
)
from .index import SavedAgent

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = ["RESUME_NOTE", "UserPrompt", "replay"]

RESUME_NOTE = (
    "[Note: this conversation was resumed from a saved session. Your IPython kernel is new: "
    "the variables, imports and definitions of earlier cells are gone (files written to disk remain).]"
)
_NOTHING_PRINTED = "(the cell ran and printed nothing)"
_IMAGE = re.compile(r"^\[image saved: (.+)\]$", re.MULTILINE)
_FINISHED: dict[str, SubagentStatus] = {
    "done": "done",
    "failed": "failed",
    "cancelled": "cancelled",
    "turn_limit": "turn_limit",
    "rejected": "rejected",
}


@dataclass(frozen=True, kw_only=True)
class UserPrompt(AgentEvent):
    """A user prompt (or a subagent's task) as saved in a transcript; a live stream does not repeat it."""

    content: str


_loop: asyncio.AbstractEventLoop | None = None


_NOT_RUN = ("The user rejected", "The user interrupted the turn before this call ran", "An approval rule refused",
            "A hook (")
"""How the results of calls that never ran begin: rejected, stopped before they ran, refused by a rule or a hook."""


def _did_not_run(result: str) -> bool:
    """Whether a call's saved result says it never ran (it is replayed as not approved)."""
    return result.startswith(_NOT_RUN)


def _decided_request(
    agent_id: str, name: str, args: dict[str, Any], call_id: str, approved: bool, asked: float, decided: float
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
                              _decision=decision, at=asked)
    request.approve(approved, at=decided)
    return request


def replay(
    messages: Sequence[ModelMessage],
    agent_id: str,
    *,
    children: dict[str, SavedAgent] | None = None,
    child_messages: Callable[[str], Sequence[ModelMessage]] | None = None,
    grandchildren: Callable[[str], dict[str, SavedAgent]] | None = None,
) -> list[AgentEvent]:
    """The events of one agent's transcript; `children` (by `task` call id) are replayed inline."""
    from pydantic_ai.messages import (
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    from ..tools import parse_arguments

    children = children or {}
    results: dict[str, str] = {}
    times: dict[str, dict[str, float]] = {}
    """Per call: when it was asked about, decided, started and ended (saved with its result)."""
    for message in messages:
        if not isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id:
                    results[part.tool_call_id] = part.model_response() if isinstance(part, RetryPromptPart) \
                        else part.model_response_str()
                    times[part.tool_call_id] = {**_saved_times(getattr(part, "metadata", None)),
                                                "ended": part.timestamp.timestamp()}
    events: list[AgentEvent] = []
    turn = 0
    for message in messages:
        if isinstance(message, ModelResponse):
            turn += 1
            saved = _saved_times(message.metadata)
            sent = saved.get("sent", message.timestamp.timestamp())
            received = saved.get("received", sent)
            events.append(TurnStarted(agent_id=agent_id, turn=turn, at=sent))
            calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            for thinking in message.parts:
                if isinstance(thinking, ThinkingPart) and thinking.content:
                    events.append(Thoughts(agent_id=agent_id, content=thinking.content, at=received))
            if text or not calls:
                events.append(Response(agent_id=agent_id, content=text, final=not calls, at=received))
            for call in calls:
                try:
                    args = _with_defaults(call.tool_name, parse_arguments(call.args))  # type: ignore[arg-type]
                except ValueError:
                    continue  # refused before approval: only its result (a ToolOutput) was shown
                result = results.get(call.tool_call_id, "")
                approved = not _did_not_run(result)
                when = times.get(call.tool_call_id, {})
                asked = when.get("asked", received)
                decided = when.get("decided", asked)
                events.append(_decided_request(agent_id, call.tool_name, args, call.tool_call_id, approved,
                                               asked, decided))
                child = children.get(call.tool_call_id)
                if call.tool_name == "task" and child is not None:
                    events.append(
                        SubagentStarted(
                            agent_id=agent_id,
                            at=when.get("started", decided),
                            subagent_id=child.agent_id,
                            tool_call_id=call.tool_call_id,
                            prompt=str(args.get("prompt", child.prompt)),
                            max_turns=int(args.get("max_turns") or 0),
                            subagent_type=child.type if child.type != "main" else "general",
                            description=" ".join(str(args.get("description") or "").split()),
                            model=(child.model or "").partition(":")[2] or (child.model or ""),  # as sent
                        )
                    )
                    if child_messages is not None:
                        events += replay(
                            child_messages(child.agent_id),
                            child.agent_id,
                            children=grandchildren(child.agent_id) if grandchildren else None,
                            child_messages=child_messages,
                            grandchildren=grandchildren,
                        )
            continue
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                if isinstance(part.content, str) and not _is_note(part.content):
                    turn = 0
                    events.append(UserPrompt(agent_id=agent_id, content=part.content, at=part.timestamp.timestamp()))
            elif isinstance(part, RetryPromptPart) and part.tool_call_id:
                events.append(ToolOutput(agent_id=agent_id, content=part.model_response(),
                                         tool_name=part.tool_name or "", tool_call_id=part.tool_call_id, is_error=True,
                                         at=part.timestamp.timestamp()))
            elif isinstance(part, ToolReturnPart):
                events += _result(agent_id, part.tool_name, part.model_response_str(), part.tool_call_id, children,
                                  part.timestamp.timestamp())
    return events


def _is_note(text: str) -> bool:
    """Whether a user-prompt part is the agent's own note to the model (resumed, interrupted, a background
    child ended), not something the user typed: its first line is in square brackets."""
    first = text.split("\n", 1)[0]
    return text == RESUME_NOTE or (first.startswith("[") and first.endswith("]"))


def _with_defaults(tool_name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A built-in tool's arguments with its defaults filled in, as the live request showed them."""
    box = _builtin_toolbox(tool_name)
    return box.with_defaults(tool_name, args) if box is not None else args


@functools.cache
def _builtin_toolbox(tool_name: str) -> Any:
    from ..tools import Toolbox, builtin_tool

    try:
        return Toolbox([builtin_tool(tool_name)])
    except Exception:  # an MCP tool, or a name the model made up
        return None


def _saved_times(metadata: Any) -> dict[str, float]:
    """The times a message or a tool result was saved with (`{"timeline": {...}}` in its metadata)."""
    found = metadata.get("timeline") if isinstance(metadata, dict) else None
    if not isinstance(found, dict):
        return {}
    return {key: float(value) for key, value in found.items() if isinstance(value, int | float)}


def _result(
    agent_id: str, tool_name: str, content: str, call_id: str, children: dict[str, SavedAgent], at: float
) -> list[AgentEvent]:
    if tool_name == "execute_ipython_cell":
        text = "" if content == _NOTHING_PRINTED else content
        images = tuple(Path(found) for found in _IMAGE.findall(text))
        output = CodeExecutionOutput(agent_id=agent_id, text=text, images=images, tool_call_id=call_id, at=at)
        if not text:
            return [output]
        return [CodeExecutionOutputChunk(agent_id=agent_id, text=text, tool_call_id=call_id, at=at), output]
    events: list[AgentEvent] = []
    child = children.get(call_id) if tool_name == "task" else None
    if child is not None:
        events.append(
            SubagentFinished(
                agent_id=agent_id,
                subagent_id=child.agent_id,
                tool_call_id=call_id,
                status=_FINISHED.get(child.status, "cancelled"),
                turns_used=child.turns,
                elapsed=_seconds(child.started, child.ended),
                at=at,
            )
        )
    events.append(ToolOutput(agent_id=agent_id, content=content, tool_name=tool_name, tool_call_id=call_id, at=at,
                             is_error=content.startswith("Invalid arguments") or content.startswith("Unknown tool")))
    return events


def _seconds(start: str | None, end: str | None) -> float:
    if not start or not end:
        return 0.0
    try:
        return (datetime.datetime.fromisoformat(end) - datetime.datetime.fromisoformat(start)).total_seconds()
    except ValueError:
        return 0.0
