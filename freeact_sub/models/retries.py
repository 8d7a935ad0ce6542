"""Retrying a model request that failed before anything of it acted, and the tree's bound on requests in flight.

What is retried: an error the provider marks as passing (`429` rate limits, `408`, `409`, `5xx`,
`529`/overloaded, also as an error event inside a stream), a connection that failed or dropped, a
stream that stopped mid-response, stayed silent past `stream_idle_timeout`, or sent a chunk that is
not JSON. What is not: a request the provider rejected (bad request, authentication, unknown model,
context window, exhausted quota), a `request_timeout` the person set, and a provider asking to wait
longer than `LONGEST_WAIT`. Those fail at once, with the provider's own message.

A retry is safe because of one invariant of the turn engine: the tool calls of a response run only
after its stream has completed (`TurnEngine._model_round` returns the whole response), so a request
that fails has run nothing, and its partial response is thrown away (a `ModelRetry` event tells the
consumers to drop what they showed of it); only complete responses reach the history and the session.

The waits: the provider's `Retry-After` (read by pydantic-ai from `retry-after-ms` or `Retry-After`)
plus up to a fifth more, so fifty children told "0.2 s" do not come back in one burst; without it,
exponential backoff from `model_retry_backoff` (doubling, at most `MAX_BACKOFF`), jittered between
half and all of it.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["LONGEST_WAIT", "MAX_BACKOFF", "RequestSlots", "StreamIdle", "backoff", "retry_reason"]

MAX_BACKOFF = 30.0
"""The longest wait backoff grows to (seconds), without a `Retry-After`."""
LONGEST_WAIT = 120.0
"""A provider asking for a longer wait than this (seconds) is not waited for: the request fails with its message."""

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""HTTP statuses retried when pydantic-ai gives the error no category of its own (any other 5xx is, too)."""

sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
"""How a retry waits; tests replace it with a fake clock that records the waits and returns at once."""


class StreamIdle(Exception):
    """The model's stream sent nothing for `stream_idle_timeout` seconds."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the stream stayed silent for {seconds:g} s")
        self.seconds = seconds


def retry_reason(exc: BaseException) -> str | None:
    """Why a failed model request may be sent again, said in a few words ("rate limited"); None: it may not."""
    from pydantic_ai.exceptions import (
        ModelAPIError,
        ModelConnectionError,
        ModelHTTPError,
        ModelOverloadedError,
        ModelQuotaExceededError,
        ModelRateLimitError,
        ModelRequestRejectedError,
        ModelRequestTimeout,
        ModelServerError,
        ModelTimeoutError,
        ModelUnavailableError,
    )

    if isinstance(exc, StreamIdle):
        return f"silent for {exc.seconds:g} s"
    if isinstance(exc, ModelQuotaExceededError | ModelRequestRejectedError):
        return None  # waiting will not help: the account or the request itself is at fault
    if isinstance(exc, ModelRequestTimeout):
        return "no answer in time" if exc.setting == "first_event_timeout" else None
    if isinstance(exc, ModelRateLimitError):
        return "rate limited"
    if isinstance(exc, ModelOverloadedError):
        return "overloaded"
    if isinstance(exc, ModelUnavailableError):
        return "unavailable"
    status = exc.status_code if isinstance(exc, ModelHTTPError) else None
    if isinstance(exc, ModelServerError) or (status is not None and (status in RETRYABLE_STATUS or status >= 500)):
        return f"server error {status}" if status is not None else "server error"
    if isinstance(exc, ModelTimeoutError):
        return "timed out"
    if isinstance(exc, ModelConnectionError):
        return "stream dropped" if exc.phase in ("read", None) else "connection failed"
    if isinstance(exc, ModelAPIError) and isinstance(exc.__cause__, json.JSONDecodeError):
        return "malformed stream"
    return None


def provider_wait(exc: BaseException) -> float | None:
    """Seconds the provider asked to wait before a retry (its `Retry-After`), if it said."""
    from pydantic_ai.exceptions import ModelAPIError

    return exc.retry_after if isinstance(exc, ModelAPIError) else None


def backoff(retry: int, first: float, asked: float | None, *, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number `retry` (1 for the first): the provider's `asked` wait plus up to a
    fifth, else `first` doubled per retry (at most `MAX_BACKOFF`) times a jitter between one half and one."""
    draw = (rng or random).random()
    if asked is not None:
        return asked * (1 + draw / 5)
    return min(MAX_BACKOFF, first * 2 ** (retry - 1)) * (0.5 + draw / 2)


class RequestSlots:
    """The tree's bound on model requests in flight (`max_model_requests`; None: unbounded), with counts to show.

    A request holds its slot while it is sent and streamed; a retry gives it back while it waits, so a
    rate-limited child does not keep others from the provider.
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._free = asyncio.Semaphore(limit) if limit is not None else None
        self.in_flight = 0
        """Requests being sent or streamed now."""
        self.peak = 0
        """The most requests that were in flight at once."""
        self.waiting = 0
        """Requests waiting for a slot now."""

    def full(self) -> bool:
        """Whether a request made now would wait for a slot."""
        return self._free is not None and self._free.locked()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot for the body of the `async with`."""
        if self._free is not None:
            self.waiting += 1
            try:
                await self._free.acquire()
            finally:
                self.waiting -= 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            yield
        finally:
            self.in_flight -= 1
            if self._free is not None:
                self._free.release()
