"""One attempt at a model request: a slot of the tree's bound, the streamed response as events, an idle limit.

`send` is what `agent.model_round` calls once per attempt; the round decides whether a failed
attempt is retried (`retries.retry_reason`). Nothing here acts on the response: its tool calls run
only after the round returns it, which is what makes a retry safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..events import AgentEvent, ModelSlot, ResponseChunk, ThoughtsChunk
from .retries import RequestSlots, StreamIdle

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models import Model
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.tools import ToolDefinition

__all__ = ["Attempt", "provider_message", "send"]


@dataclass
class Attempt:
    """One attempt at a model request: when it was sent, and whether part of its response was shown."""

    sent: float | None = None
    shown: bool = False
    on_open: Callable[[], None] | None = None
    """Called once the response stream is open (the provider has the request)."""


async def send(
    model: Model,
    history: Sequence[ModelMessage],
    tools: list[ToolDefinition],
    model_settings: dict[str, Any] | None,
    *,
    agent_id: str,
    slots: RequestSlots,
    idle: float | None,
    emit: Callable[[AgentEvent], None],
    attempt: Attempt,
    instrument: InstrumentationSettings | None = None,
) -> ModelResponse:
    """Send one model request and stream its response (text and thinking as `agent_id`'s events), noting in
    `attempt` when it was sent and whether a chunk was shown. Holds one of `slots` while it runs (a wait for
    one is a `ModelSlot` event). A stream silent for `idle` seconds raises `StreamIdle`. With `instrument` (telemetry
on), pydantic-ai's own `chat <model>` span covers the request, under the span current here (the turn's)."""
    from pydantic_ai.direct import model_request_stream
    from pydantic_ai.models import ModelRequestParameters

    parameters = ModelRequestParameters(function_tools=tools)
    settings: Any = dict(model_settings or {})
    if "max_retries" not in type(model).unsupported_settings:
        settings.setdefault("max_retries", 0)  # ours are the only retries: seen, counted, and bounded by the tree
    waited_from = None
    if slots.full() and slots.limit is not None:
        waited_from = time.monotonic()
        emit(ModelSlot(agent_id=agent_id, waiting=True, limit=slots.limit))
    async with slots.slot():
        if waited_from is not None and slots.limit is not None:
            emit(ModelSlot(agent_id=agent_id, waiting=False, limit=slots.limit, waited=time.monotonic() - waited_from))
        attempt.sent = time.time()
        async with contextlib.AsyncExitStack() as stack:
            async with _idle_limit(idle):
                stream = await stack.enter_async_context(model_request_stream(
                    model, list(history), model_settings=settings, model_request_parameters=parameters,
                    instrument=instrument,
                ))
            if attempt.on_open is not None:
                attempt.on_open()
            events = aiter(stream)
            while True:
                async with _idle_limit(idle):
                    try:
                        event = await anext(events)
                    except StopAsyncIteration:
                        break
                chunk = _chunk(event, agent_id)
                if chunk is not None:
                    attempt.shown = True
                    emit(chunk)
            return stream.get()


@contextlib.asynccontextmanager
async def _idle_limit(seconds: float | None) -> AsyncIterator[None]:
    """Raise `StreamIdle` when the body takes longer than `seconds` (None: no limit)."""
    if seconds is None:
        yield
        return
    limit = asyncio.timeout(seconds)
    try:
        async with limit:
            yield
    except TimeoutError:
        if limit.expired():
            raise StreamIdle(seconds) from None
        raise


def provider_message(exc: BaseException) -> str:
    """What the provider said about a failed request: its error body's message, else the exception's text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        message = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(message, str) and message:
            return message
    return getattr(exc, "message", None) or str(exc) or type(exc).__name__


def _chunk(event: object, agent_id: str) -> AgentEvent | None:
    """The `ResponseChunk` or `ThoughtsChunk` a stream event carries (a new part's first text, or more of it)."""
    from pydantic_ai.messages import (
        PartDeltaEvent,
        PartStartEvent,
        TextPart,
        TextPartDelta,
        ThinkingPart,
        ThinkingPartDelta,
    )

    piece: object
    if isinstance(event, PartStartEvent):
        piece, content = event.part, getattr(event.part, "content", "")
    elif isinstance(event, PartDeltaEvent):
        piece, content = event.delta, getattr(event.delta, "content_delta", "")
    else:
        return None
    if not content or not isinstance(content, str):
        return None
    if isinstance(piece, TextPart | TextPartDelta):
        return ResponseChunk(agent_id=agent_id, content=content)
    if isinstance(piece, ThinkingPart | ThinkingPartDelta):
        return ThoughtsChunk(agent_id=agent_id, content=content)
    return None
