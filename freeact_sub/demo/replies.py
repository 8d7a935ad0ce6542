"""What the scripted model answers with (`Reply`, `ToolCall`, `ModelErrorReply`), and what it reads of a request.

A request is read as a `Conversation`: the prompt that matters, the step of the current turn, the
tool results since the prompt and the tools offered (see `scenario.py`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Conversation",
    "ModelErrorReply",
    "Reply",
    "ToolCall",
    "carries_files",
    "cell",
    "read_request",
    "rejection",
    "result_value",
    "text_of",
]


@dataclass(frozen=True)
class ToolCall:
    """A tool call the scripted model makes."""

    name: str
    arguments: dict[str, Any]
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:12]}")


@dataclass(frozen=True)
class Reply:
    """One scripted model response: thinking (`reasoning_content`), text and tool calls, in that order."""

    reasoning: str = ""
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ModelErrorReply:
    """The request fails with this HTTP status and message."""

    status: int
    message: str


@dataclass(frozen=True)
class Conversation:
    """One request as the scripted model reads it."""

    prompt: str
    step: int
    results: list[str]
    """Contents of the tool results after the prompt, in order."""
    tools: list[str]
    """Names of the tools the request offers."""
    system: str = ""
    """The system prompt (it says whether MCP tools are Python functions in the kernel)."""
    images: int = 0
    """Images the model received with the tool results after the prompt."""
    task_description: str = ""
    """The `task` tool's description (it lists the agent types the caller may start)."""

    @property
    def is_main(self) -> bool:
        """Whether the request is the main agent's (it is offered the `task` tool)."""
        return "task" in self.tools

    def tool_ending(self, suffix: str) -> str | None:
        """The offered tool whose name ends with `suffix` (an MCP tool with its server's prefix), if any."""
        return next((name for name in self.tools if name.endswith(suffix)), None)



def read_request(request: Mapping[str, Any]) -> Conversation:
    """What the scripted model reads of one chat-completions request."""
    messages: Sequence[Mapping[str, Any]] = request.get("messages") or []
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user" and not carries_files(m)),
                    default=-1)
    prompt = text_of(messages[last_user].get("content")) if last_user >= 0 else ""
    after = messages[last_user + 1 :]
    tools = [t.get("function", {}).get("name", "") for t in request.get("tools") or []]
    functions: list[Mapping[str, Any]] = [t.get("function") or {} for t in request.get("tools") or []]
    task: Mapping[str, Any] = next((f for f in functions if f.get("name") == "task"), {})
    return Conversation(
        prompt=prompt,
        step=sum(1 for m in after if m.get("role") == "assistant"),
        results=[text_of(m.get("content")) for m in after if m.get("role") == "tool"],
        tools=tools,
        task_description=str(task.get("description") or ""),
        system="".join(text_of(m.get("content")) for m in messages if m.get("role") == "system"),
        images=sum(
            1
            for m in after
            if carries_files(m)
            for part in m.get("content") or []
            if isinstance(part, Mapping) and part.get("type") == "image_url"
        ),
    )


def carries_files(message: Mapping[str, Any]) -> bool:
    """A user message that only carries a tool result's files (chat completions has no images in tool messages)."""
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list) or not content:
        return False
    first = content[0]
    return isinstance(first, Mapping) and str(first.get("text", "")).startswith("<pyai:tool_result")


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return ""


def rejection(c: Conversation) -> str | None:
    """The last tool result, when it says the user rejected the call (with a reason, or the model would not see it)."""
    last = c.results[-1] if c.results and c.step > 0 else ""
    if "reject" not in last.lower() or result_value(last) is not None:
        return None
    return " ".join(last.split())[:300]


def result_value(text: str) -> str | None:
    """The value a cell printed as `RESULT: <value>`, if it did."""
    match = re.search(r"RESULT:\s*(\S+)", text)
    return match.group(1) if match else None


def cell(code: str) -> ToolCall:
    """An `execute_ipython_cell` call that runs `code`."""
    return ToolCall("execute_ipython_cell", {"code": code})
