"""What the host accepts of a kernel's messages: a kernel holds its own connection key, so it may forge any.

Every message a backend receives passes `checked` before the cell reader looks at it: a message
whose parts have the wrong types (content that is not a mapping, text that is not a string, a
traceback of numbers) is dropped and counted, never allowed to raise in the host. Only the fields
the reader uses are kept, with their types made sure of. Size is bounded before a message is
decoded (`MAX_MESSAGE_BYTES`, the local client's sockets); depth by the JSON decoder, whose failure
counts as a malformed message like any other.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_MESSAGE_BYTES", "Message", "checked", "is_output", "malformed_notice"]

Message = dict[str, Any]
"""One Jupyter message as a dict (`header`, `parent_header`, `msg_type`, `content`, …)."""

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The largest message part the host receives from a local kernel; a larger one ends the connection (ZeroMQ's
`MAXMSGSIZE`), which is made again, and the message is lost. An image of up to ~12 MB fits."""

_OUTPUT_KINDS = ("stream", "error", "execute_result", "display_data")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def checked(message: Any) -> Message | None:
    """`message` with the fields the reader uses, of the right types; None if it is malformed."""
    if not isinstance(message, dict):
        return None
    kind, parent, content = message.get("msg_type"), message.get("parent_header"), message.get("content")
    if not isinstance(kind, str) or not isinstance(content, dict):
        return None
    if parent is None:
        parent = {}
    if not isinstance(parent, dict):
        return None
    parent_id = parent.get("msg_id")
    if parent_id is not None and not isinstance(parent_id, str):
        return None
    safe: dict[str, Any] = {}
    if kind == "status":
        if (state := _text(content.get("execution_state"))) is None:
            return None
        safe["execution_state"] = state
    elif kind == "stream":
        if (text := _text(content.get("text"))) is None:
            return None
        safe["text"] = text
        safe["name"] = _text(content.get("name")) or "stdout"
    elif kind == "error":
        traceback = content.get("traceback", [])
        if not isinstance(traceback, list) or not all(isinstance(line, str) for line in traceback):
            return None
        safe["traceback"] = traceback
    elif kind in ("execute_result", "display_data"):
        data = content.get("data", {})
        if not isinstance(data, dict):
            return None
        safe["data"] = {key: value for key, value in data.items() if isinstance(key, str) and isinstance(value, str)}
    elif kind == "execute_reply":
        safe["status"] = _text(content.get("status")) or ""
    safe_message = {"msg_type": kind, "parent_header": {"msg_id": parent_id} if parent_id else {}, "content": safe}
    if isinstance(channel := message.get("channel"), str):  # a gateway's messages say which channel they came on
        safe_message["channel"] = channel
    return safe_message


def malformed_notice(count: int) -> str:
    """What a cell's output ends with when the kernel sent `count` messages the host could not read."""
    plural = "message" if count == 1 else "messages"
    return f"\n[The host dropped {count} malformed {plural} from the kernel (unreadable or of the wrong shape).]\n"


def is_output(kind: str) -> bool:
    """Whether messages of this kind carry a cell's output."""
    return kind in _OUTPUT_KINDS
