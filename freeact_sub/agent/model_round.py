"""One model round: a complete model response, sent again (after a wait) while it fails in a way worth retrying.

The invariant retries rest on: nothing of a response acts before it is complete. Its tool calls
run only after `model_round` returns it, so a request that fails here has run nothing, and its
partial response, never in the history, is simply dropped (`ModelRetry` says so to the consumers
that showed it). Only the response that completed is returned, saved and counted.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ModelError
from ..events import ModelRetry, ModelUsage, Thoughts
from ..models import retries
from ..models.request import Attempt, provider_message, send
from ..models.retries import LONGEST_WAIT, backoff, provider_wait, retry_reason
from .traced import traced_model

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.models import Model

    from ..events import Emit
    from .turn_owner import TurnOwner

__all__ = ["model_round"]


async def model_round(owner: TurnOwner, emit: Emit, model: Model, *, ran_nothing: Callable[[], bool]) -> ModelResponse:
    """The next model response of `owner`'s conversation with `model`; `ModelError` once retrying ends.

    `ran_nothing` checks the invariant above before each retry.
    """
    from pydantic_ai.messages import ThinkingPart

    settings = owner.settings
    attempts = settings.model_retries + 1
    first_sent: float | None = None
    retried: list[dict[str, Any]] = []
    attempt = 1
    while True:
        this = Attempt(on_open=functools.partial(owner.tree.request_sent, owner.agent_id))
        try:
            response = await send(
                model, owner.conversation.messages, owner.parts.toolbox.definitions(), settings.model_settings,
                agent_id=owner.agent_id, slots=owner.tree.model_requests, idle=settings.stream_idle_timeout,
                emit=emit, attempt=this, instrument=traced_model(owner),
            )
            break
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            assert ran_nothing(), "a model request is retried only before its calls ran"
            first_sent = first_sent or this.sent
            reason = retry_reason(exc)
            asked = provider_wait(exc)
            if reason is None or attempt >= attempts or (asked is not None and asked > LONGEST_WAIT):
                tried = f" (after {attempt} attempts)" if attempt > 1 else ""
                waits = (f" (the provider asked to wait {asked:g} s, longer than {LONGEST_WAIT:g} s)"
                         if reason is not None and asked is not None and asked > LONGEST_WAIT else "")
                raise ModelError(f"the model request failed{tried}: {type(exc).__name__}: {exc}{waits}") from exc
            wait = backoff(attempt, settings.model_retry_backoff, asked)
            attempt += 1
            owner.tree.usage.retried(owner.agent_id)
            said = provider_message(exc)
            retried.append({"at": time.time(), "attempt": attempt, "attempts": attempts, "wait": wait,
                            "reason": reason, "message": said[:500]})
            emit(ModelRetry(agent_id=owner.agent_id, attempt=attempt, attempts=attempts, wait=wait, reason=reason,
                            message=said, discarded=this.shown))
            await retries.sleep(wait)
    # when the request went out and the response was complete, saved with it (for the timeline)
    timeline: dict[str, Any] = {"sent": first_sent or this.sent, "received": time.time()}
    if retried:
        timeline["retries"] = retried
    response.metadata = {**(response.metadata or {}), "timeline": timeline}
    used = owner.tree.usage.record(owner.agent_id, response)
    emit(ModelUsage(agent_id=owner.agent_id, model_name=response.model_name or "", input_tokens=used.input_tokens,
                    output_tokens=used.output_tokens, cost=used.cost))
    for part in response.parts:
        if isinstance(part, ThinkingPart) and part.content:
            emit(Thoughts(agent_id=owner.agent_id, content=part.content))
    return response
