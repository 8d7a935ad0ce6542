"""Faults the scripted model server can answer with, as real providers do on a bad day.

A `Fault` replaces one model request's normal answer: an HTTP error (`429` with or without
`Retry-After`, `500`, `529`, …), or a stream that starts normally and then breaks after `after`
chunks — cut (the connection drops), silent (nothing more arrives), malformed (a chunk that is not
JSON), or an error event inside the stream (Anthropic's `overloaded_error`, OpenAI's `error`
chunk). A server's `faults` callable decides, per request, which fault (if any) to inject; both
protocols of `DemoServer` consult it, so tests and `bench` speak real HTTP to it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ContextLimit", "Fault", "FaultChooser", "FaultPlan", "RandomFaults", "conversation_of", "fault_headers",
    "faulty_stream",
]

FaultKind = Literal["status", "cut", "silent", "malformed", "error_event"]


@dataclass(frozen=True, kw_only=True)
class Fault:
    """How one model request goes wrong."""

    kind: FaultKind = "status"
    """`status`: an HTTP error instead of a stream; the others break a stream after `after` chunks."""
    status: int = 429
    """The HTTP status of a `status` fault (429, 500, 503, 529, …); for `error_event`, the status it stands for."""
    retry_after: float | None = None
    """Seconds sent as `retry-after-ms` (and as `Retry-After` when whole), as OpenAI and Anthropic send them."""
    message: str = ""
    """The provider's message; empty: one that fits the status."""
    after: int = 3
    """Chunks (OpenAI) or events (Anthropic) sent before a stream breaks."""
    silence: float = 60.0
    """Seconds a `silent` stream stays silent before it ends without finishing."""
    error_type: str | None = None
    """The error body's `type` of a `status` fault; None: the one the protocol sends for the status."""
    code: str | None = None
    """The error body's `code` (OpenAI's `context_length_exceeded`, …); None: none."""

    def text(self) -> str:
        return self.message or _MESSAGES.get(self.status, f"scripted failure {self.status}")


FaultChooser = Callable[[str, Mapping[str, Any]], Fault | None]
"""Decides, from the protocol (`openai`, `anthropic`) and the request body, whether (and how) one request fails."""

_MESSAGES = {
    408: "Request timed out.",
    409: "Conflict, please retry.",
    429: "Rate limit reached for requests. Please try again.",
    500: "The server had an error while processing your request.",
    502: "Bad gateway.",
    503: "The service is temporarily unavailable.",
    529: "Overloaded",
}

ANTHROPIC_ERROR_TYPES = {
    408: "timeout_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}
"""The Messages API's error `type` for a status (what Anthropic sends in the body and in an `error` event)."""


def fault_headers(fault: Fault) -> dict[str, str]:
    """The retry headers of a `status` fault."""
    if fault.retry_after is None:
        return {}
    headers = {"retry-after-ms": str(round(fault.retry_after * 1000))}
    if float(fault.retry_after).is_integer():
        headers["retry-after"] = str(int(fault.retry_after))
    return headers


class StreamCut(Exception):
    """Raised inside a streaming response: the server drops the connection mid-body, as a broken proxy does."""


class _QuietCuts(logging.Filter):
    """Keeps uvicorn from logging a scripted cut as "Exception in ASGI application": it is the point, not a bug."""

    def filter(self, record: logging.LogRecord) -> bool:
        seen: list[BaseException | None] = [record.exc_info[1] if record.exc_info else None]
        while seen:
            exc = seen.pop()
            if exc is None:
                continue
            if isinstance(exc, StreamCut):
                return False
            seen += [exc.__cause__, exc.__context__, *getattr(exc, "exceptions", ())]
        return True


logging.getLogger("uvicorn.error").addFilter(_QuietCuts())


async def faulty_stream(
    stream: AsyncIterator[Any], fault: Fault, *, malformed: Any, error_event: Any
) -> AsyncIterator[Any]:
    """`stream` for `after` items, then the fault: a dropped connection, silence, a malformed item or an error event."""
    sent = 0
    async for item in stream:
        if sent >= fault.after:
            break
        yield item
        sent += 1
    if fault.kind == "cut":
        raise StreamCut(f"scripted stream cut after {sent} chunks")
    if fault.kind == "silent":
        await asyncio.sleep(fault.silence)
    elif fault.kind == "malformed":
        yield malformed
    elif fault.kind == "error_event":
        yield error_event


def conversation_of(body: Mapping[str, Any]) -> tuple[str, int]:
    """The first user message of a request (which conversation it belongs to) and its round (assistant turns so far).

    The same for both protocols: chat completions and the Messages API both send `messages` with `user` and
    `assistant` roles, and a text content or a list of blocks."""
    first, rounds = "", 0
    for message in body.get("messages") or []:
        if message.get("role") == "assistant":
            rounds += 1
        elif message.get("role") == "user" and not first:
            content = message.get("content")
            first = content if isinstance(content, str) else " ".join(
                part.get("text", "") for part in content or [] if isinstance(part, Mapping))
    return first, rounds


class FaultPlan:
    """Faults by conversation and round: `plan.add("CHILD 3", 1, Fault(status=429), Fault(kind="cut"))` fails the
    first two attempts of round 1 (the second request) of the conversation whose first user message starts
    with `CHILD 3`. Use it as a server's `faults`; `attempts` counts the requests per (marker, round)."""

    def __init__(self) -> None:
        self._faults: dict[tuple[str, int], tuple[Fault, ...]] = {}
        self.attempts: dict[tuple[str, int], int] = {}

    def add(self, marker: str, round: int, *faults: Fault) -> None:
        self._faults[(marker, round)] = faults

    def clear(self) -> None:
        self._faults.clear()
        self.attempts.clear()

    def __call__(self, wire: str, body: Mapping[str, Any]) -> Fault | None:
        first, rounds = conversation_of(body)
        for (marker, round), faults in self._faults.items():
            if round == rounds and first.startswith(marker):
                attempt = self.attempts.get((marker, round), 0)
                self.attempts[(marker, round)] = attempt + 1
                return faults[attempt] if attempt < len(faults) else None
        return None


class RandomFaults:
    """Each request fails with one of `faults` at its rate (`[(0.2, Fault(status=429)), (0.05, Fault(kind="cut"))]`),
    drawn from a seeded generator; `counts` says how many of each kind were injected, `requests` how many came."""

    def __init__(self, faults: list[tuple[float, Fault]], *, seed: int = 0) -> None:
        import random

        self.faults = faults
        self._random = random.Random(seed)
        self.requests = 0
        self.counts: dict[str, int] = {}

    def __call__(self, wire: str, body: Mapping[str, Any]) -> Fault | None:
        self.requests += 1
        draw = self._random.random()
        for rate, fault in self.faults:
            if draw < rate:
                name = f"{fault.kind} {fault.status}" if fault.kind in ("status", "error_event") else fault.kind
                self.counts[name] = self.counts.get(name, 0) + 1
                return fault
            draw -= rate
        return None


class ContextLimit:
    """A model with a context window of `tokens`: a request whose messages hold more (four characters a token, as the
    server counts usage) is refused with the provider's real error, a 400 that pydantic-ai reads as
    `ModelContextWindowExceededError`: OpenAI's `context_length_exceeded`, Anthropic's "prompt is too long".
    `refused` counts them; `largest` is the largest request (tokens) that was let through. Use it as a server's
    `faults`, alone or before another chooser (`then`)."""

    def __init__(self, tokens: int, then: FaultChooser | None = None) -> None:
        self.tokens = tokens
        self.then = then
        self.refused = 0
        self.largest = 0

    def __call__(self, wire: str, body: Mapping[str, Any]) -> Fault | None:
        import json

        used = len(json.dumps(body.get("messages", []))) // 4
        if used <= self.tokens:
            self.largest = max(self.largest, used)
            return self.then(wire, body) if self.then is not None else None
        self.refused += 1
        if wire == "anthropic":
            return Fault(status=400, error_type="invalid_request_error",
                         message=f"prompt is too long: {used} tokens > {self.tokens} maximum")
        return Fault(status=400, error_type="invalid_request_error", code="context_length_exceeded",
                     message=f"This model's maximum context length is {self.tokens} tokens. However, your messages "
                             f"resulted in {used} tokens. Please reduce the length of the messages.")
