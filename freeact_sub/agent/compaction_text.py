"""The words of a compaction: where history is cut, the request that asks for a summary, and what replaces it.

`cut_point` chooses the latest rounds kept verbatim: the kept part always starts at a model
response, so every tool result kept has its call, and every call kept has its result (a provider
rejects a tool result whose call is gone). `summary_prompt` writes the older part as plain text
(big results clipped, so the request fits even when the history itself overflowed) with the
kernel's live names, for one request without tools. `compacted_request` is what the model gets
instead of the older rounds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..models.context import CHARS_PER_TOKEN, message_chars

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelRequest

__all__ = ["SUMMARY_SYSTEM_PROMPT", "compacted_request", "cut_point", "latest_prompt", "summary_prompt"]

SUMMARY_SYSTEM_PROMPT = (
    "You write the summary that replaces the older part of a code-action agent's conversation when its context "
    "window fills up. The agent works by running Python in a persistent IPython kernel. Write for the agent "
    "itself, which will continue the work from your summary and the latest rounds (kept verbatim): the person's "
    "requests and constraints in their own words where they matter, what was done and found (numbers, file "
    "paths, names of variables, functions and data in the kernel, and what they hold), what failed and why, and "
    "what remains to do. Prefer facts to narrative. Do not call tools; answer with the summary only."
)
COMPACTED_NOTE = (
    "[This conversation was compacted: its older rounds are replaced by the summary below, which the model "
    "wrote{focus}. The latest rounds follow verbatim. The IPython kernel was not touched: everything the "
    "earlier cells defined is still there.]"
)
_PIECE = (2_000, 600, 200)
"""How many characters of one entry (a result, a cell's code, a message) the summary request keeps, tried in turn
until the request fits."""


def cut_point(messages: Sequence[ModelMessage], keep_rounds: int, budget_tokens: int) -> int:
    """The index where the verbatim part starts: at most `keep_rounds` latest rounds within `budget_tokens`.

    Always at a model response (its tool results follow it), never at 0; `len(messages)` keeps none.
    """
    kept_chars, start, rounds = 0, len(messages), 0
    for index in range(len(messages) - 1, 0, -1):
        kept_chars += message_chars(messages[index])
        if kept_chars // CHARS_PER_TOKEN > budget_tokens:
            break
        if messages[index].kind == "response":
            rounds += 1
            if rounds > keep_rounds:
                break
            start = index
    return start


def latest_prompt(messages: Sequence[ModelMessage]) -> str | None:
    """The text of the person's latest prompt in `messages` (None if they hold none)."""
    for message in reversed(messages):
        if message.kind != "request":
            continue
        saved = (message.metadata or {}).get("compaction")
        if saved is not None:  # an earlier compaction's request: the prompt it kept verbatim
            return saved.get("prompt")
        for part in reversed(message.parts):
            content = getattr(part, "content", None)
            if part.part_kind == "user-prompt" and isinstance(content, str) and not content.startswith("["):
                return content
    return None


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[… {len(text) - limit} characters cut …]\n{text[-tail:]}"


def _entries(messages: Sequence[ModelMessage], limit: int) -> list[str]:
    """One line block per part, each clipped to `limit` characters."""
    entries: list[str] = []
    for message in messages:
        summary = (getattr(message, "metadata", None) or {}).get("compaction")
        for part in message.parts:
            kind = part.part_kind
            content: Any = getattr(part, "content", None)
            if kind == "system-prompt":
                continue
            if kind == "user-prompt":
                text = content if isinstance(content, str) else " ".join(c for c in content if isinstance(c, str))
                label = "earlier summary" if summary is not None else "user"
                entries.append(f"[{label}]\n{text if summary is not None else _clip(text, limit)}")
            elif kind == "tool-return":
                text = part.model_response_str()  # type: ignore[union-attr]
                entries.append(f"[result of {part.tool_name}]\n{_clip(text, limit)}")  # type: ignore[union-attr]
            elif kind == "retry-prompt":
                entries.append(f"[tool error]\n{_clip(str(content), limit)}")
            elif kind == "text" and content:
                entries.append(f"[assistant]\n{_clip(content, limit)}")
            elif kind == "tool-call":
                args: Any = part.args_as_dict() if hasattr(part, "args_as_dict") else {}
                code = args.get("code") if isinstance(args, dict) else None
                shown = code if isinstance(code, str) else json.dumps(args, default=str)
                entries.append(f"[call {part.tool_name}]\n{_clip(shown, limit)}")  # type: ignore[union-attr]
    return entries


def summary_prompt(
    messages: Sequence[ModelMessage], names: str | None, *, focus: str | None, budget_tokens: int
) -> str:
    """The user message of the summary request: the older conversation as text, the kernel's names, the focus.

    Entries are clipped harder until the text fits `budget_tokens`; if even the shortest do not fit, the
    oldest are left out (the first prompt stays), and the text says so.
    """
    budget = budget_tokens * CHARS_PER_TOKEN
    entries: list[str] = []
    for limit in _PIECE:
        entries = _entries(messages, limit)
        if sum(len(e) + 2 for e in entries) <= budget:
            break
    else:
        first, rest = entries[:1], entries[1:]
        total = sum(len(e) + 2 for e in entries)
        dropped = 0
        while rest and total > budget:
            total -= len(rest.pop(0)) + 2
            dropped += 1
        entries = [*first, f"[… {dropped} earlier entries left out to fit the request …]", *rest]
    parts = ["<conversation>", "\n\n".join(entries), "</conversation>"]
    if names is not None:
        parts += ["", "The agent's IPython kernel is still running. Its live names and types (what `%whos` shows) "
                      "are below; name the ones that matter and what they hold, so the agent knows what it can "
                      "still use:", "<kernel>", names, "</kernel>"]
    parts += ["", "Write the summary now."]
    if focus:
        parts += [f"Focus the summary on: {focus}"]
    return "\n".join(parts)


def compacted_request(
    first: ModelRequest, summary: str, names: str | None, prompt: str | None, *, focus: str | None,
    continue_note: bool, metadata: dict[str, Any],
) -> ModelRequest:
    """The request that replaces the older rounds: the old first request's system prompt, the summary, the kernel's
    names, the person's latest prompt verbatim when it was summarized, and (with nothing kept after it) a word to go
    on."""
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    system = [part for part in first.parts if part.part_kind == "system-prompt"]
    text = [COMPACTED_NOTE.format(focus=f" with a focus on: {focus}" if focus else ""),
            "<summary>", summary.strip(), "</summary>"]
    if names is not None:
        text += ["", "The kernel's names and types at the compaction (`%whos`):", names]
    if prompt is not None:
        text += ["", "The person's latest request, verbatim:", prompt]
    if continue_note:
        text += ["", "Continue the work from where the summary ends."]
    return ModelRequest(parts=[*system, UserPromptPart("\n".join(text))], metadata={"compaction": metadata})
