"""The kernel side of MCP calls from code: copied into each generated `mcptools` package as `_runtime.py`.

Standard library only, so it imports in any kernel in a few milliseconds. The agent calls
`configure(socket_path, secret)` in its own kernel (and again after a restart); a call then
opens (or reuses) a connection to that Unix socket, proves itself with the secret, sends
`{"server", "tool", "arguments"}` and blocks until the agent answers: after the approval and
the MCP call, or with the reason it did not run. Frames are a 4-byte big-endian length and
UTF-8 JSON. An interrupt (KeyboardInterrupt) while waiting drops the connection, and the agent
then drops the call.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from typing import Any

__all__ = [
    "ToolArgumentError",
    "ToolCallError",
    "ToolCancelled",
    "ToolError",
    "ToolRejected",
    "call_tool",
    "configure",
]

_HEADER = struct.Struct(">I")


class ToolCallError(Exception):
    """Base of the errors an MCP tool call from code raises."""


class ToolError(ToolCallError):
    """The tool or its MCP server failed; the message is the server's."""


class ToolRejected(ToolCallError):
    """The call was not approved (by the person, or by a `deny` rule); it did not run."""


class ToolArgumentError(ToolCallError, TypeError):
    """The arguments do not fit the tool's input schema; nothing was sent to the server."""


class ToolCancelled(ToolCallError):
    """The turn was cancelled, or the agent stopped, while the call waited or ran."""


_ERRORS: dict[str, type[ToolCallError]] = {
    "tool_error": ToolError,
    "rejected": ToolRejected,
    "arguments": ToolArgumentError,
    "cancelled": ToolCancelled,
}

_settings: dict[str, str] = {}
_idle: list[socket.socket] = []
_lock = threading.Lock()


def configure(socket_path: str, secret: str) -> None:
    """Connect this kernel's calls to its agent (done by the agent, not by user code)."""
    with _lock:
        _settings.update(path=socket_path, secret=secret)
        for connection in _idle:
            connection.close()
        _idle.clear()


def call_tool(
    server: str, tool: str, arguments: dict[str, Any], *, omit_none: tuple[str, ...] = (), unwrap: bool = False
) -> Any:
    """Call `tool` of `server` through the agent; returns its structured result, else its text.

    Arguments named in `omit_none` are left out when they are None (optional, not given).
    """
    arguments = {key: value for key, value in arguments.items() if value is not None or key not in omit_none}
    payload = {"server": server, "tool": tool, "arguments": arguments}
    connection = _connection()
    try:
        _send(connection, payload)
        reply = _receive(connection)
    except BaseException:
        connection.close()  # a half-finished exchange (an interrupt, a lost agent): never reused
        raise
    with _lock:
        _idle.append(connection)
    if not reply.get("ok"):
        error = _ERRORS.get(reply.get("error", ""), ToolCallError)
        raise error(reply.get("message", "the call failed"))
    if reply.get("has_structured"):
        value = reply.get("structured")
        if unwrap and isinstance(value, dict) and set(value) == {"result"}:
            return value["result"]
        return value
    return reply.get("text", "")


def _connection() -> socket.socket:
    with _lock:
        if _idle:
            return _idle.pop()
        path, secret = _settings.get("path"), _settings.get("secret")
    if not path or not secret:
        raise ToolCallError(
            "mcptools is not connected to an agent in this kernel (it may have been restarted "
            "while this cell started); run the cell again"
        )
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
        _send(connection, {"secret": secret})
        answer = _receive(connection)
    except OSError as exc:
        connection.close()
        raise ToolCallError(f"the agent that owns this kernel cannot be reached: {exc}") from None
    except BaseException:
        connection.close()
        raise
    if not answer.get("ok"):
        connection.close()
        raise ToolCallError(answer.get("message", "the agent refused the connection"))
    return connection


def _send(connection: socket.socket, message: dict[str, Any]) -> None:
    data = json.dumps(message).encode()
    connection.sendall(_HEADER.pack(len(data)) + data)


def _receive(connection: socket.socket) -> dict[str, Any]:
    (size,) = _HEADER.unpack(_read_exactly(connection, _HEADER.size))
    value = json.loads(_read_exactly(connection, size))
    return value if isinstance(value, dict) else {}


def _read_exactly(connection: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = connection.recv(min(size, 1 << 20))
        if not chunk:
            raise ToolCallError("the agent closed the connection (it stopped)")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
