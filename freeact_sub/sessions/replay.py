"""A saved transcript as the events a live `stream()` produced, so the same renderers show it.

What a transcript keeps is what the model saw: prompts, thinking, text, tool calls and their
results. Streamed text chunks are not kept (their complete forms are); a cell's output is the
text the model received, replayed as one chunk and the complete output; a `task` call's child
is replayed from its own transcript, framed by `SubagentStarted` / `SubagentFinished` as it
was live. A user prompt, which a live stream does
not repeat, becomes a `UserPrompt` event.

What the live view showed beyond the transcript is read from the session's `shown.jsonl`
(`shown.py`): how each call was decided and by whom, the MCP calls a cell's code made (their
requests, decisions and results come before the cell's output), and each rewind (after the messages it kept).
"""

from __future__ import annotations

import datetime
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..events import (
    AgentEvent,
    CodeExecutionOutput,
    CodeExecutionOutputChunk,
    ContextCompacted,
    ModelRetry,
    Response,
    SubagentFinished,
    SubagentStarted,
    SubagentStatus,
    Thoughts,
    ToolOutput,
    TurnStarted,
)
from .index import SavedAgent
from .shown import (
    SavedDecision,
    Shown,
    code_calls,
    did_not_run,
    read_shown,
    request_from,
    rewound_after,
    rewound_event,
    saved_decision,
)

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = ["RESUME_NOTE", "SavedDecision", "Shown", "UserPrompt", "read_shown", "replay"]

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


def replay(
    messages: Sequence[ModelMessage],
    agent_id: str,
    *,
    children: dict[str, SavedAgent] | None = None,
    child_messages: Callable[[str], Sequence[ModelMessage]] | None = None,
    grandchildren: Callable[[str], dict[str, SavedAgent]] | None = None,
    shown: dict[str, Shown] | None = None,
) -> list[AgentEvent]:
    """The events of one agent's transcript; `children` (by `task` call id) are replayed inline.

    `shown` (from `read_shown`) adds what the live view showed beyond the transcript.
    """
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
    mine = (shown.get(agent_id) or Shown()) if shown is not None else None
    background: set[str] = set()
    refused: set[str] = set()
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
    rewinds = list(mine.rewinds) if mine is not None else []
    for index, message in enumerate(messages):
        while rewinds and rewound_after(rewinds[0]) <= index:  # a rewind shows where it cut the conversation
            events.append(rewound_event(agent_id, rewinds.pop(0)))
        if isinstance(message, ModelResponse):
            turn += 1
            saved = _saved_times(message.metadata)
            sent = saved.get("sent", message.timestamp.timestamp())
            received = saved.get("received", sent)
            events.append(TurnStarted(agent_id=agent_id, turn=turn, at=sent))
            events += _saved_retries(agent_id, message.metadata)
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
                when = times.get(call.tool_call_id, {})
                asked = when.get("asked", received)
                decided = when.get("decided", asked)
                record = mine.decisions.get(call.tool_call_id) if mine is not None else None
                if mine is not None and record is None and call.tool_call_id in results and not did_not_run(result):
                    refused.add(call.tool_call_id)  # refused by a check at once: no request, only its result
                    events += _result(agent_id, call.tool_name, result, call.tool_call_id, {},
                                      when.get("ended", received), refused=True)
                    continue
                events.append(request_from(agent_id, call.tool_name, args, call.tool_call_id, record,
                                            not did_not_run(result), asked, decided))
                if mine is not None:
                    events.append(saved_decision(agent_id, call.tool_call_id, record, decided))
                child = children.get(call.tool_call_id)
                if call.tool_name == "task" and child is not None and args.get("run_in_background"):
                    background.add(call.tool_call_id)
                if call.tool_name == "task" and child is not None:
                    events.append(_started(agent_id, child, call.tool_call_id, args, when.get("started", decided)))
                    if child_messages is not None:
                        events += replay(
                            child_messages(child.agent_id),
                            child.agent_id,
                            children=grandchildren(child.agent_id) if grandchildren else None,
                            child_messages=child_messages,
                            grandchildren=grandchildren,
                            shown=shown,
                        )
                    if args.get("run_in_background"):  # it ended on its own, after its call had returned
                        events.append(_finished(agent_id, child, call.tool_call_id, _epoch(child.ended, decided)))
            continue
        if (compaction := (message.metadata or {}).get("compaction")) is not None:
            events.append(_compacted(agent_id, message, compaction))
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
                content = part.model_response_str()
                if did_not_run(content) or part.tool_call_id in refused:
                    continue  # nothing reported it live: its request says it was not approved
                at = part.timestamp.timestamp()
                if mine is not None and part.tool_name == "execute_ipython_cell":
                    for event in code_calls(agent_id, mine.code_calls.get(part.tool_call_id, []), at):
                        events.append(event)  # a subagent the cell's code started: inline after its decision
                        if not isinstance(event, SavedDecision) or not event.approved:
                            continue
                        child = children.get(event.tool_call_id) or children.get(f"{event.tool_call_id}-fix")
                        if child is not None:
                            events.append(_started(agent_id, child, event.tool_call_id, {}, at))
                            if child_messages is not None:
                                events += replay(child_messages(child.agent_id), child.agent_id, shown=shown)
                            events.append(_finished(agent_id, child, event.tool_call_id, at))
                events += _result(agent_id, part.tool_name, content, part.tool_call_id,
                                  {k: v for k, v in children.items() if k not in background}, at,
                                  kernel_wait=times.get(part.tool_call_id, {}).get("kernel_wait", 0.0))
    events += [rewound_event(agent_id, record) for record in rewinds]
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


def _saved_retries(agent_id: str, metadata: Any) -> list[AgentEvent]:
    """The retries a response needed before it completed, saved with it (`{"timeline": {"retries": [...]}}`)."""
    found = metadata.get("timeline") if isinstance(metadata, dict) else None
    saved = found.get("retries") if isinstance(found, dict) else None
    events: list[AgentEvent] = []
    for retry in saved if isinstance(saved, list) else []:
        try:
            events.append(ModelRetry(agent_id=agent_id, at=float(retry["at"]), attempt=int(retry["attempt"]),
                                     attempts=int(retry.get("attempts", 0)), wait=float(retry["wait"]),
                                     reason=str(retry["reason"]), message=str(retry.get("message", ""))))
        except (KeyError, TypeError, ValueError):
            continue  # a record this version cannot read: the response itself still replays
    return events


def _saved_times(metadata: Any) -> dict[str, float]:
    """The times a message or a tool result was saved with (`{"timeline": {...}}` in its metadata)."""
    found = metadata.get("timeline") if isinstance(metadata, dict) else None
    if not isinstance(found, dict):
        return {}
    return {key: float(value) for key, value in found.items() if isinstance(value, int | float)}


def _result(
    agent_id: str, tool_name: str, content: str, call_id: str, children: dict[str, SavedAgent], at: float, *,
    refused: bool = False, kernel_wait: float = 0.0,
) -> list[AgentEvent]:
    if tool_name == "execute_ipython_cell" and not refused:
        text = "" if content == _NOTHING_PRINTED else content
        images = tuple(Path(found) for found in _IMAGE.findall(text))
        output = CodeExecutionOutput(agent_id=agent_id, content=text, images=images, tool_call_id=call_id, at=at,
                                     kernel_wait=kernel_wait)
        if not text:
            return [output]
        return [CodeExecutionOutputChunk(agent_id=agent_id, content=text, tool_call_id=call_id, at=at), output]
    events: list[AgentEvent] = []
    child = children.get(call_id) if tool_name == "task" else None
    if child is not None:
        events.append(_finished(agent_id, child, call_id, at))
    events.append(ToolOutput(agent_id=agent_id, content=content, tool_name=tool_name, tool_call_id=call_id, at=at,
                             is_error=refused or content.startswith(("Invalid arguments", "Unknown tool"))))
    return events


def _started(agent_id: str, child: SavedAgent, call_id: str, args: dict[str, Any], at: float) -> SubagentStarted:
    return SubagentStarted(
        agent_id=agent_id,
        at=at,
        subagent_id=child.agent_id,
        tool_call_id=call_id,
        prompt=str(args.get("prompt", child.prompt)),
        max_turns=int(args.get("max_turns") or 0),
        agent_type=child.agent_type if child.agent_type != "main" else "general",
        description=" ".join(str(args.get("description") or "").split()),
        model=(child.model or "").partition(":")[2] or (child.model or ""),  # as sent
        sandbox=child.sandbox or "",
        sandbox_limits=child.sandbox_limits if child.sandbox else "",
    )


def _finished(agent_id: str, child: SavedAgent, call_id: str, at: float) -> SubagentFinished:
    return SubagentFinished(
        agent_id=agent_id,
        subagent_id=child.agent_id,
        tool_call_id=call_id,
        status=_FINISHED.get(child.status, "cancelled"),
        turns_used=child.turns,
        elapsed=_seconds(child.started, child.ended),
        at=at,
    )



def _epoch(iso: str | None, default: float) -> float:
    try:
        return datetime.datetime.fromisoformat(iso).timestamp() if iso else default
    except ValueError:
        return default


def _seconds(start: str | None, end: str | None) -> float:
    if not start or not end:
        return 0.0
    try:
        return (datetime.datetime.fromisoformat(end) - datetime.datetime.fromisoformat(start)).total_seconds()
    except ValueError:
        return 0.0


def _compacted(agent_id: str, message: ModelMessage, saved: dict[str, Any]) -> ContextCompacted:
    """The `ContextCompacted` event a saved compaction stands for (its summary request and what it recorded)."""
    text = "".join(p.content for p in message.parts if p.part_kind == "user-prompt" and isinstance(p.content, str))
    summary = text.partition("<summary>\n")[2].partition("\n</summary>")[0]
    return ContextCompacted(
        agent_id=agent_id, at=message.timestamp.timestamp() if message.timestamp else 0.0,
        trigger=saved.get("trigger", "auto"), tokens_before=int(saved.get("tokens_before") or 0),
        tokens_after=int(saved.get("tokens_after") or 0), context_window=saved.get("context_window"),
        summary=summary, messages_summarized=int(saved.get("messages_summarized") or 0),
        messages_kept=int(saved.get("messages_kept") or 0), focus=saved.get("focus"), started=saved.get("started"),
    )
