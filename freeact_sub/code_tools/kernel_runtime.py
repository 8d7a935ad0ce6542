"""The kernel side of MCP calls from code: copied into each generated `mcptools` package as `_runtime.py`.

Standard library only, so it imports in any kernel in a few milliseconds. The agent calls
`configure(secret)` in its own kernel (and again after a restart); a call then takes an idle
connection, or accepts the agent's next one on the kernel's own listener (bound by the kernel at start,
its descriptor in `FREEACT_SUB_TOOLS_LISTENER`: a sandboxed kernel cannot make a socket to connect with),
checks that it opens with the secret, sends `{"server", "tool", "arguments"}` and blocks until the agent
answers: after the approval and
the MCP call, or with the reason it did not run. Frames are a 4-byte big-endian length and
UTF-8 JSON. An interrupt (KeyboardInterrupt) while waiting drops the connection, and the agent
then drops the call.
"""

from __future__ import annotations

import hmac
import json
import os
import socket
import struct
import sys
import threading
import time
import traceback
from typing import Any

__all__ = [
    "ToolArgumentError",
    "ToolCallError",
    "ToolCancelled",
    "ToolError",
    "ToolRejected",
    "call_tool",
    "configure",
    "request",
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

_ACCEPT_TIMEOUT = 15.0
"""Seconds a call waits for the agent's connection before it says the agent cannot be reached."""

_settings: dict[str, str] = {}
_idle: list[socket.socket] = []
_lock = threading.Lock()
_listener: list[socket.socket] = []
refused = 0
"""Connections refused because they did not open with this kernel's secret."""


def configure(secret: str) -> None:
    """Connect this kernel's calls to its agent (done by the agent, not by user code)."""
    with _lock:
        _settings.update(secret=secret)
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
    reply = request({"server": server, "tool": tool, "arguments": arguments})
    if not reply.get("ok"):
        error = _ERRORS.get(reply.get("error", ""), ToolCallError)
        raise error(reply.get("message", "the call failed"))
    if reply.get("has_structured"):
        value = reply.get("structured")
        if unwrap and isinstance(value, dict) and set(value) == {"result"}:
            return value["result"]
        return value
    return reply.get("text", "")


def request(payload: dict[str, Any]) -> dict[str, Any]:
    """Send one request to the agent and wait for its reply (a dict; `ok` false with `error` and `message` when
    the request was refused or failed). Blocks the calling thread; used by the tool functions and by
    `freeact_sub_tasks`."""
    connection = _connection()
    try:
        _send(connection, payload)
        reply = _receive(connection)
    except BaseException:
        connection.close()  # a half-finished exchange (an interrupt, a lost agent): never reused
        raise
    with _lock:
        _idle.append(connection)
    return reply


def _connection() -> socket.socket:
    global refused
    with _lock:
        if _idle:
            return _idle.pop()
        secret = _settings.get("secret")
        listener = _listening_socket()
    if not secret or listener is None:
        raise ToolCallError(
            "mcptools is not connected to an agent in this kernel (it may have been restarted "
            "while this cell started); run the cell again"
        )
    deadline = time.monotonic() + _ACCEPT_TIMEOUT
    while True:
        try:
            listener.settimeout(max(deadline - time.monotonic(), 0.001))
            connection, _ = listener.accept()
        except OSError as exc:
            raise ToolCallError(f"the agent that owns this kernel cannot be reached: {exc}") from None
        try:
            connection.settimeout(5.0)
            greeting = _receive(connection)
            connection.settimeout(None)
        except BaseException:
            connection.close()
            raise
        offered = greeting.get("secret")
        if isinstance(offered, str) and hmac.compare_digest(offered.encode(), secret.encode()):
            _send(connection, {"accepted": True})  # the agent then queues its next connection
            return connection
        refused += 1
        connection.close()


def _listening_socket() -> socket.socket | None:
    """This kernel's code-tools listener (bound by the kernel application before any code ran)."""
    if not _listener:
        descriptor = os.environ.get("FREEACT_SUB_TOOLS_LISTENER")
        if not descriptor:
            return None
        _listener.append(socket.socket(fileno=int(descriptor)))
    return _listener[0]


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


_OURS = (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.__file__))
"""Frames in these folders are not shown when a call from code fails: the generated package (this `_runtime.py`,
`_tasks.py`, the tools' modules), and the standard library (the threads and event loop a batch waits in)."""


def _short_traceback(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> list[str]:
    """What a cell shows when a call from code fails and the cell does not catch it: the lines of the person's (or
    the model's) code that made the call, then the one `ToolRejected: …` line; not the frames of the generated
    modules and of IPython, 40 lines the model would read for nothing."""
    frames = [frame for frame in traceback.extract_tb(tb)
              if not frame.filename.startswith(_OURS) and "/IPython/" not in frame.filename]
    shown = ["Traceback (most recent call last):\n", *traceback.format_list(frames[-3:])] if frames else []
    stb = [*shown, f"{etype.__name__}: {value}"]
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb  # as IPython's own traceback leaves them
    # IPython 9 leaves the showing to the handler; `_showtraceback` is how ipykernel sends an `error` message
    show = getattr(shell, "_showtraceback", None)
    if show is not None:
        show(etype, value, stb)
    else:
        print("".join(stb), file=sys.stderr)
    return stb


def _show_calls_briefly() -> None:
    """Let an uncaught `ToolCallError` (and `TaskError`) show only its call site, unless this kernel's IPython already
    has a handler of its own for some exceptions (then nothing is changed)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and not getattr(shell, "custom_exceptions", ()):
        shell.set_custom_exc((ToolCallError,), _short_traceback)


_show_calls_briefly()
