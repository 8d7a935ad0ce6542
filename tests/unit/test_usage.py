"""Usage arithmetic and pricing with the real `genai-prices` table."""

from __future__ import annotations

from decimal import Decimal

import genai_prices
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.usage import RequestUsage

from freeact_sub.usage import Usage, UsageLedger, price_of


def response(model: str, *, provider: str | None = None, url: str | None = None, tokens: tuple[int, int] = (1000, 500),
             cost: Decimal | None = None) -> ModelResponse:
    usage = RequestUsage(input_tokens=tokens[0], output_tokens=tokens[1], cost=cost)
    return ModelResponse(parts=[TextPart("hi")], usage=usage, model_name=model, provider_name=provider,
                         provider_url=url)


def test_a_known_model_is_priced_from_the_table() -> None:
    expected = genai_prices.calc_price(RequestUsage(input_tokens=1000, output_tokens=500), "gpt-4.1",
                                       provider_id="openai").total_price
    assert expected > 0
    assert price_of(response("gpt-4.1", provider="openai")) == expected
    assert price_of(response("gpt-4.1", provider="openai", url="https://api.openai.com/v1")) == expected


def test_unknown_models_and_local_servers_have_no_price() -> None:
    assert price_of(response("my-local-llama", provider="openai")) is None
    # the protocol is OpenAI's, but the address is a local server: its tokens are not OpenAI's to price
    assert price_of(response("gpt-4.1", provider="openai", url="http://127.0.0.1:8000/v1")) is None
    assert price_of(response("scripted")) is None  # a FunctionModel names no provider


def test_a_cost_the_provider_reported_wins() -> None:
    assert price_of(response("anything", cost=Decimal("0.25"))) == Decimal("0.25")


def test_ledger_sums_per_agent_and_for_the_tree() -> None:
    ledger = UsageLedger()
    ledger.record("agent-a", response("gpt-4.1", provider="openai", tokens=(100, 10)))
    ledger.record("agent-a", response("gpt-4.1", provider="openai", tokens=(200, 20)))
    ledger.record("agent-b", response("scripted", tokens=(7, 3)))
    tree = ledger.snapshot()
    a, b = tree.of("agent-a"), tree.of("agent-b")
    assert (a.requests, a.input_tokens, a.output_tokens, a.unpriced_requests) == (2, 300, 30, 0)
    assert a.cost is not None and a.cost > 0
    assert (b.requests, b.total_tokens, b.cost, b.unpriced_requests) == (1, 10, None, 1)
    assert tree.total == a + b
    assert tree.total.cost == a.cost and tree.total.unpriced_requests == 1
    assert tree.of("agent-nobody") == Usage()
