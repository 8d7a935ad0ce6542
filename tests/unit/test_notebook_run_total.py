"""The run's tokens and cost, summed over every agent, are said once: in the run's header (issue 40, item 37); the
main agent's panel keeps its own, as each subagent's panel does (the run's total was said twice before)."""

from __future__ import annotations

from decimal import Decimal

from freeact_sub import ApprovalPolicy, ModelUsage, SubagentStarted
from freeact_sub.notebook.run_panel import RunPanel


def test_the_run_header_alone_shows_tokens_and_cost_summed_over_the_run() -> None:
    run = RunPanel("agent-1", "delegate", policy=ApprovalPolicy(), on_stop=lambda: None)
    run.handle(
        ModelUsage(agent_id="agent-1", model_name="m", input_tokens=100, output_tokens=20, cost=Decimal("0.0010"))
    )
    run.handle(SubagentStarted(agent_id="agent-1", subagent_id="agent-2", tool_call_id="t1", prompt="job", max_turns=5))
    run.handle(
        ModelUsage(agent_id="agent-2", model_name="m", input_tokens=300, output_tokens=30, cost=Decimal("0.0025"))
    )
    assert "450 tokens · $0.0035" in run.usage_line.value
    text = run.static_text()
    assert text.count("450 tokens") == 1, text  # said once, in the header
    assert "120 tokens · $0.0010" in text and "330 tokens · $0.0025" in text  # each agent's own, in its panel
