"""A folder whose `AGENTS.md`, skills or agent types with powers wait for the person's trust, asked about in the chat.

A session in such a folder starts without those files (they stay inert), so its id can be handed out at once.
Its first prompt asks first, as a permission request of its own (any ACP client shows one, JupyterLab's chat as
a card with buttons): the title names what waits, the content (and `rawInput`, what JupyterLab's card shows) each
file and what it would do. The answers:

| option id | kind           | what happens                                                           |
|-----------|----------------|------------------------------------------------------------------------|
| `trust`   | `allow_always` | the folder is trusted (until these files change); the agent restarts with them |
| `session` | `allow_once`   | the agent restarts with them, for this session only                    |
| `without` | `reject_once`  | the session goes on without them, and does not ask again               |

A `cancelled` answer cancels the prompt and asks again at the next one. With `--trust-project` or
`--no-trust-project` nobody is asked.
"""

from __future__ import annotations

from typing import Any, Literal

from acp import text_block, tool_content
from acp.schema import PermissionOption, ToolCallUpdate

__all__ = ["TRUST_CALL", "Choice", "choice", "trust_options", "trust_question"]

TRUST_CALL = "trust-project"
"""The id of the question's tool call (a session asks it once)."""

Choice = Literal["trust", "session", "without", "cancelled"]


def trust_question(project: Any) -> ToolCallUpdate:
    """The question as a tool call: what waits for trust, each file and what it would do."""
    text = project.question()
    return ToolCallUpdate(
        tool_call_id=TRUST_CALL,
        title=f"Trust this folder's {project.kinds}? ({project.names()})",
        kind="other",
        status="pending",
        content=[tool_content(text_block(text))],
        raw_input=text,
    )


def trust_options() -> list[PermissionOption]:
    return [
        PermissionOption(option_id="trust", name="Trust this folder", kind="allow_always"),
        PermissionOption(option_id="session", name="Use them this session", kind="allow_once"),
        PermissionOption(option_id="without", name="Run without them", kind="reject_once"),
    ]


def choice(response: Any) -> Choice:
    """The person's answer; anything but a known option (a reject of another client's making) runs without them."""
    outcome = response.outcome
    if outcome.outcome != "selected":
        return "cancelled"
    picked = getattr(outcome, "option_id", None)
    return picked if picked in ("trust", "session") else "without"
