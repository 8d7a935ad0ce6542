"""One tool call of any agent as the client shows it: its id, kind, title and content.

A cell's code, an MCP call's arguments or a `task` call's job is the call's first content block;
what it prints follows as it streams. A subagent's calls carry its id and type in their titles, so
a person sees who is acting; a `task` call is renamed after the child it started, and the child's
answer becomes its output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from acp import text_block, tool_content
from acp.schema import ContentToolCallContent, FileEditToolCallContent, TerminalToolCallContent

__all__ = ["CallView", "call_kind", "call_title", "summary"]

Kind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]


def call_kind(tool_name: str) -> Kind:
    """The protocol's kind of a call: code runs (`execute`), a subagent thinks for us (`think`), MCP tools `fetch`."""
    if tool_name in ("execute_ipython_cell", "reset_kernel"):
        return "execute"
    if tool_name == "task":
        return "think"
    return "fetch" if "_" in tool_name else "other"


def summary(text: str, limit: int = 80) -> str:
    """`text` on one line in at most `limit` characters: cut at a word where it can be, and then it ends with `…`."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    word_end = cut.rfind(" ")
    return (cut[:word_end] if word_end > limit // 2 else cut).rstrip(" ,;:.") + "…"


def call_title(tool_name: str, args: dict[str, Any], who: str | None, source: str = "model") -> str:
    """`Run Python`, `Call demo_constant (from code)`, `Start a subagent: review`; `who` (a subagent's id and type)
    goes first when another agent than the main one acts."""
    if tool_name == "execute_ipython_cell":
        what = "Run Python"
    elif tool_name == "reset_kernel":
        what = "Reset the kernel"
    elif tool_name == "task":
        kind = args.get("subagent_type") or "general"
        description = summary(str(args.get("description") or args.get("prompt", "")), 60)
        what = f"Start a subagent ({kind}): {description}".rstrip(": ")
    else:
        what = f"Call {tool_name}" + (" (from code)" if source == "code" else "")
    return f"{who} · {what}" if who else what


def _shown_input(tool_name: str, args: dict[str, Any]) -> str:
    if tool_name == "execute_ipython_cell":
        return f"```python\n{args.get('code', '')}\n```"
    if tool_name == "task":
        return str(args.get("prompt", ""))
    return f"```json\n{json.dumps(args, indent=2, ensure_ascii=False, default=str)}\n```"


@dataclass
class CallView:
    """What the client holds for one call; every update sends its whole content (the protocol replaces it)."""

    acp_id: str
    tool_name: str
    args: dict[str, Any]
    title: str
    output: str = ""
    notes: list[str] = field(default_factory=list)
    """A subagent's own words (its answers and thoughts), shown in its `task` call."""
    status: str = "pending"
    """The status the client was last sent: a call still `pending` or `in_progress` when its turn is cancelled is
    ended `failed`."""

    @property
    def ended(self) -> bool:
        return self.status in ("completed", "failed")

    @property
    def kind(self) -> Kind:
        return call_kind(self.tool_name)

    @property
    def raw_input(self) -> dict[str, Any]:
        """The call's arguments, and for a cell its code once more as `command`: JupyterLab's chat shows an `execute`
        call's `rawInput.command` on the card a person approves, and nothing else of it (not the content)."""
        if self.tool_name == "execute_ipython_cell":
            return {**self.args, "command": str(self.args.get("code", ""))}
        return self.args

    def content(self) -> list[ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent]:
        blocks = [_shown_input(self.tool_name, self.args), *self.notes]
        if self.output:
            fence = "```" if self.tool_name == "execute_ipython_cell" else ""
            blocks.append(f"{fence}\n{self.output.rstrip()}\n{fence}" if fence else self.output)
        shown: list[ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent] = [
            tool_content(text_block(text)) for text in blocks if text]
        return shown
