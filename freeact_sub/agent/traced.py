"""Where an agent's turn meets the tree's telemetry: its run, its rounds, its tool calls, its model requests.

Each helper costs one attribute read when telemetry is off (`owner.tree.telemetry` is None).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from ..events import Emit
    from .turn_owner import TurnOwner

__all__ = ["traced_call", "traced_emit", "traced_model", "traced_run", "traced_turn"]

T = TypeVar("T")


class _Ending(Protocol):
    """How the turn engine says a turn ended (`TurnEngine`)."""

    turn_limit_reached: bool
    last_turn_rejected: bool


def traced_model(owner: TurnOwner) -> InstrumentationSettings | None:
    """pydantic-ai's instrumentation for `owner`'s model requests, or None with telemetry off."""
    telemetry = owner.tree.telemetry
    return telemetry.instrumentation() if telemetry is not None else None


def traced_emit(owner: TurnOwner, emit: Emit) -> Emit:
    """`emit`, also handing the telemetry each event `owner` itself produced (its children's pass through their own)."""
    telemetry = owner.tree.telemetry
    if telemetry is None:
        return emit
    agent_id = owner.agent_id

    def tapped(event: Any) -> None:
        if event.agent_id == agent_id:
            telemetry.observe(event)
        emit(event)

    return tapped


async def traced_run(owner: TurnOwner, engine: _Ending, body: Awaitable[None], prompt: str) -> None:
    """Run `body` (one `stream()` turn of `owner`) inside its run span; the span ends with its outcome and usage."""
    telemetry = owner.tree.telemetry
    if telemetry is None:
        return await body
    from opentelemetry import context as otel_context

    record = owner.tree.agents.get(owner.agent_id)
    model = owner.model
    here = telemetry.start_run(
        owner.agent_id, agent_type=getattr(owner, "agent_type", "general"),
        model=getattr(model, "model_name", "") or str(model), parent_id=record.parent_id if record else None,
        tool_call_id=record.tool_call_id if record else None,
        session_id=getattr(owner.tree.root, "session_id", None), prompt=prompt,
    )
    before = owner.tree.usage.of(owner.agent_id)
    outcome = "failed"
    token = otel_context.attach(here)
    try:
        await body
        outcome = ("turn_limit" if engine.turn_limit_reached else "rejected" if engine.last_turn_rejected
                   else "done")
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    finally:
        otel_context.detach(token)
        used = owner.tree.usage.of(owner.agent_id)
        telemetry.end_run(owner.agent_id, outcome=outcome, usage=_minus(used, before),
                          is_child=owner.is_subagent)


@contextlib.contextmanager
def traced_turn(owner: TurnOwner, number: int) -> Iterator[None]:
    """The span of one model round of `owner` and its tool calls (nothing with telemetry off)."""
    telemetry = owner.tree.telemetry
    if telemetry is None:
        yield
        return
    with telemetry.turn(owner.agent_id, number):
        yield


async def traced_call(owner: TurnOwner, call: ToolCallPart, body: Awaitable[T]) -> T:
    """Run one tool call of the model inside its span (its children's runs go under it)."""
    telemetry = owner.tree.telemetry
    if telemetry is None:
        return await body
    arguments = call.args_as_dict() if call.args else {}
    with telemetry.tool_call(owner.agent_id, call.tool_call_id, call.tool_name, arguments):
        return await body


def _minus(after: Any, before: Any) -> Any:
    """What a run added to an agent's usage (its life's totals after, less before)."""
    from ..usage import Usage

    cost = None if after.cost is None else after.cost - (before.cost or 0)
    return Usage(requests=after.requests - before.requests, input_tokens=after.input_tokens - before.input_tokens,
                 output_tokens=after.output_tokens - before.output_tokens, cost=cost,
                 unpriced_requests=after.unpriced_requests - before.unpriced_requests,
                 retries=after.retries - before.retries)
