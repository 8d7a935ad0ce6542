"""What the demo server's two protocol modules share: the server they answer for, and how text is streamed.

`openai.py` and `anthropic.py` each turn a `ScriptedModel`'s replies into one provider's wire
format; `server.py` serves both on one port. Neither protocol module imports the server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, Protocol

from .faults import Fault, fault_headers
from .replies import ModelErrorReply, Reply

Wire = Literal["openai", "anthropic"]


class ScriptedModel(Protocol):
    """The server as the protocol handlers see it: who decides the replies, how fast they stream, the request log."""

    chunk_delay: float
    """Seconds between streamed chunks."""
    responder: Callable[[Mapping[str, Any]], Reply | ModelErrorReply]
    """Decides each reply from a chat-completions shaped request."""
    faults: Callable[[str, Mapping[str, Any]], Fault | None] | None
    """Decides, per request (protocol and body as sent), whether it fails and how (`faults.Fault`); None: never."""

    def log(self, protocol: Wire, body: dict[str, Any]) -> None:
        """Record one model request's body as it arrived."""


def pieces(text: str) -> Iterator[str]:
    """Split text into small streamable pieces (a word with its following space)."""
    yield from (m.group(0) for m in re.finditer(r"\S+\s*|\s+", text))


async def read_model_request(
    server: ScriptedModel, protocol: Wire, request: Any, error: Callable[..., Any], no_messages: str
) -> tuple[dict[str, Any], Fault | None] | Any:
    """A model request's body, logged, and the fault chosen for it; or the error response that refuses it.

    `request` is Starlette's; `error(status, message, headers=None, *, kind=None, code=None)` makes the protocol's error
    response; `no_messages` says, in the protocol's words, that the body has no list of messages.
    A `status` fault is answered here, with its retry headers.
    """
    try:
        body = await request.json()
    except json.JSONDecodeError:
        return error(400, "the request body is not valid JSON")
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return error(400, no_messages)
    server.log(protocol, body)
    fault = server.faults(protocol, body) if server.faults is not None else None
    if fault is not None and fault.kind == "status":
        return error(fault.status, fault.text(), fault_headers(fault), kind=fault.error_type, code=fault.code)
    return body, fault
