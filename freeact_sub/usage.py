"""Token usage and cost per agent: every model response is recorded in the tree's `UsageLedger`.

pydantic-ai reports a `RequestUsage` on each `ModelResponse`, whatever the provider. The ledger
adds it to the totals of the agent that made the request and prices it with pydantic's maintained
price table (`genai-prices`); the agent reports it in a `ModelUsage` event. A model the
table does not know (a local server, a scripted model) is counted in tokens only: its cost is
None, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelResponse

__all__ = ["TreeUsage", "Usage", "UsageLedger", "model_is_priced", "price_of"]


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Tokens and cost of some model responses (one agent's, or a whole tree's)."""

    requests: int = 0
    """Model responses counted."""
    input_tokens: int = 0
    """Input (prompt) tokens, cache reads and writes included."""
    output_tokens: int = 0
    """Output (completion) tokens, thinking included."""
    cost: Decimal | None = None
    """USD, summed over the responses whose price is known; None if no response could be priced."""
    unpriced_requests: int = 0
    """Responses whose model is not in the price table (counted in tokens, not in `cost`)."""
    retries: int = 0
    """Model requests sent again after a failure before they acted (a rate limit, an overload, a dropped stream)."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens: what a `max_tokens` budget counts."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if self.cost is None and other.cost is None:
            cost = None
        else:
            cost = (self.cost or Decimal(0)) + (other.cost or Decimal(0))
        return Usage(
            requests=self.requests + other.requests,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost=cost,
            unpriced_requests=self.unpriced_requests + other.unpriced_requests,
            retries=self.retries + other.retries,
        )


@dataclass(frozen=True)
class TreeUsage:
    """A snapshot of an agent tree's usage: per agent id, and the sum."""

    by_agent: dict[str, Usage] = field(default_factory=dict)
    """Totals of each agent that made a model request, main agent and subagents alike."""

    @property
    def total(self) -> Usage:
        """The whole tree's totals."""
        total = Usage()
        for usage in self.by_agent.values():
            total = total + usage
        return total

    def of(self, agent_id: str) -> Usage:
        """One agent's totals (zero if it made no request)."""
        return self.by_agent.get(agent_id, Usage())


class UsageLedger:
    """The usage of every agent of one tree, shared by the main agent and all its subagents."""

    def __init__(self) -> None:
        self._by_agent: dict[str, Usage] = {}

    def record(self, agent_id: str, response: ModelResponse) -> Usage:
        """Add one model response to `agent_id`'s totals; returns that response's own usage."""
        usage = response.usage
        cost = price_of(response)
        one = Usage(
            requests=1,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost=cost,
            unpriced_requests=0 if cost is not None else 1,
        )
        self._by_agent[agent_id] = self.of(agent_id) + one
        return one

    def retried(self, agent_id: str) -> None:
        """Count one retry of a model request of `agent_id`."""
        self._by_agent[agent_id] = self.of(agent_id) + Usage(retries=1)

    def of(self, agent_id: str) -> Usage:
        """`agent_id`'s totals so far."""
        return self._by_agent.get(agent_id, Usage())

    def snapshot(self) -> TreeUsage:
        """Totals per agent and for the tree, as they are now."""
        return TreeUsage(dict(self._by_agent))


def price_of(response: ModelResponse) -> Decimal | None:
    """The USD price of one response from `genai-prices`, or None if its model or provider is unknown.

    The provider is found by the address the request went to (a `base_url` the table does not
    know, such as a local server, is not priced), else by the provider's name. A cost the
    provider reported itself (a gateway) wins over the table.
    """
    usage = response.usage
    if usage.cost is not None:
        return Decimal(usage.cost)
    if not response.model_name or usage.unmeasured_requests:
        return None
    import genai_prices

    where: dict[str, str]
    if response.provider_url:
        # an address the table does not know (a local server, a proxy) is not priced as its protocol's vendor
        where = {"provider_api_url": response.provider_url}
    elif response.provider_name:
        where = {"provider_id": response.provider_name}
    else:
        return None
    try:
        calculation = genai_prices.calc_price(
            usage, response.model_name, genai_request_timestamp=response.timestamp, **where  # type: ignore[call-overload]
        )
    except LookupError:
        return None
    except Exception:  # a table entry that cannot price this usage: tokens only
        return None
    return calculation.total_price


def model_is_priced(model: Any) -> bool:
    """Whether `genai-prices` knows the price of a pydantic-ai `Model` (so a cost budget can be held)."""
    import genai_prices
    from pydantic_ai.usage import RequestUsage

    name = getattr(model, "model_name", None)
    url, provider = getattr(model, "base_url", None), getattr(model, "system", None)
    if not name or not (url or provider):
        return False
    where = {"provider_api_url": url} if url else {"provider_id": provider}
    try:
        genai_prices.calc_price(RequestUsage(input_tokens=1, output_tokens=1), name, **where)
    except Exception:  # unknown model or provider, or an entry that cannot price tokens
        return False
    return True
