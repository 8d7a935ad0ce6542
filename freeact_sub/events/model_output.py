"""What the model produced: its text and thinking (streamed and complete), and its requests' usage, retries, slots."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from .base import AgentEvent

__all__ = ["ModelRetry", "ModelSlot", "ModelUsage", "Response", "ResponseChunk", "Thoughts", "ThoughtsChunk"]


@dataclass(frozen=True, kw_only=True)
class _ModelText(AgentEvent):
    """Text of the model: its answer or its thinking, a streamed piece or the whole of one response."""

    content: str
    """The text."""


@dataclass(frozen=True, kw_only=True)
class ResponseChunk(_ModelText):
    """A piece of the model's text, as it streams."""


@dataclass(frozen=True, kw_only=True)
class ThoughtsChunk(_ModelText):
    """A piece of the model's thinking, as it streams."""


@dataclass(frozen=True, kw_only=True)
class Response(_ModelText):
    """The model's complete text of one model response (or the final answer of a turn)."""

    final: bool = False
    """True for the answer that ends the turn (no further tool calls follow)."""


@dataclass(frozen=True, kw_only=True)
class Thoughts(_ModelText):
    """The model's complete thinking of one model response."""


@dataclass(frozen=True, kw_only=True)
class ModelUsage(AgentEvent):
    """The token usage of one model response of `agent_id`, emitted as soon as the response is complete.

    Totals per agent and for the tree: `Agent.usage`.
    """

    model_name: str
    """The model that answered, as the provider named it."""
    input_tokens: int
    """Input (prompt) tokens of the request, cache reads and writes included."""
    output_tokens: int
    """Output tokens of the response, thinking included."""
    cost: Decimal | None = None
    """USD from the `genai-prices` table; None when the model or provider is not in it."""


@dataclass(frozen=True, kw_only=True)
class ModelRetry(AgentEvent):
    """A model request of `agent_id` failed before any of its tool calls ran, and is sent again after `wait` seconds.

    Whatever its stream had shown is thrown away (`discarded`): drop the partial text and thinking of
    this agent's round and show the new attempt's instead. The retried response is the only one that
    reaches the history and the saved session. A request that runs out of retries fails as before.
    """

    attempt: int
    """The attempt about to be made: 2 for the first retry."""
    attempts: int
    """The most attempts this request gets (`model_retries` + 1)."""
    wait: float
    """Seconds until it is sent again: the provider's `Retry-After` (plus jitter), else exponential backoff."""
    reason: str
    """Why, in a few words: `rate limited`, `overloaded`, `server error 500`, `stream dropped`, `silent for 300 s`,
    `malformed stream`, …"""
    message: str = ""
    """The provider's own message (or the transport's), as it said it."""
    discarded: bool = False
    """Whether part of the failed response had been streamed (`ResponseChunk`, `ThoughtsChunk`) and is thrown away."""


@dataclass(frozen=True, kw_only=True)
class ModelSlot(AgentEvent):
    """A model request of `agent_id` waits for a slot: the tree has `limit` requests in flight (`max_model_requests`).

    Emitted with `waiting=True` when the wait begins and with `waiting=False` when the request got its
    slot (only for a request that had to wait).
    """

    waiting: bool
    limit: int
    waited: float = 0.0
    """Seconds it waited (with `waiting=False`)."""
