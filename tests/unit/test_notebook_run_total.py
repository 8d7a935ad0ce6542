"""The main panel's header adds the run's total over every agent once a subagent has used tokens."""

from __future__ import annotations

from decimal import Decimal

from freeact_sub import ApprovalPolicy, ModelUsage, SubagentStarted
from freeact_sub.notebook.run_panel import RunPanel


def test_the_main_header_shows_tokens_and_cost_summed_over_the_run() -> None:
    run = RunPanel("agent-1", "delegate", policy=ApprovalPolicy(), on_stop=lambda: None)
    run.handle(ModelUsage(agent_id="agent-1", model_name="m", input_tokens=100, output_tokens=20,
                          cost=Decimal("0.0010")))
    alone = run.static_text()
    assert "120 tokens" in alone and "all agents" not in alone  # one agent: its own usage is the total
    run.handle(SubagentStarted(agent_id="agent-1", subagent_id="agent-2", tool_call_id="t1", prompt="job",
                               max_turns=5))
    run.handle(ModelUsage(agent_id="agent-2", model_name="m", input_tokens=300, output_tokens=30,
                          cost=Decimal("0.0025")))
    text = run.static_text()
    assert "all agents: 450 tokens · $0.0035" in text
    assert "330 tokens · $0.0025" in text  # the child's own panel keeps its own
