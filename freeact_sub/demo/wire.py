"""What the demo server's two protocol modules share: the server they answer for, and how text is streamed.

`openai.py` and `anthropic.py` each turn a `ScriptedModel`'s replies into one provider's wire
format; `server.py` serves both on one port. Neither protocol module imports the server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .scenario import ModelErrorReply, Reply

if TYPE_CHECKING:
    from .faults import Fault

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
