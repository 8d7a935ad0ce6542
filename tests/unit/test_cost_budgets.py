"""Cost budgets (`max_cost`): per subagent (a `task` call or its type) and for the whole tree (`AgentConfig`)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.usage import RequestUsage

from freeact_sub import Agent, AgentConfig, AgentType, ConfigError
from freeact_sub.subagents.task_notes import task_call_notes
from tests.scripting import Script


def priced(cost: str) -> ModelResponse:
    usage = RequestUsage(input_tokens=10, output_tokens=5, cost=Decimal(cost))
    return ModelResponse(parts=[TextPart("x")], usage=usage)


def test_an_agents_cost_budget_is_used_up_once_its_requests_cost_that_much(tmp_path: Path) -> None:
    agent = Agent(AgentConfig(model="test", working_dir=tmp_path))
    agent.budgets.max_cost = 0.05
    agent.tree.usage.record(agent.agent_id, priced("0.03"))
    assert agent.turns.used_up_budget() is None
    agent.tree.usage.record(agent.agent_id, priced("0.02"))
    assert agent.turns.used_up_budget() == "its budget of $0.05 was used up ($0.0500)"


def test_the_trees_cost_budget_counts_every_agent(tmp_path: Path) -> None:
    agent = Agent(AgentConfig(model="test", working_dir=tmp_path, max_cost=0.1))
    agent.tree.usage.record(agent.agent_id, priced("0.04"))
    agent.tree.usage.record("agent-child", priced("0.07"))  # a subagent's spending counts too
    assert agent.turns.used_up_budget() == "the session's budget of $0.1 was used up ($0.1100 for all agents)"


async def test_a_tree_budget_on_a_model_without_a_known_price_is_refused_at_start(tmp_path: Path) -> None:
    config = AgentConfig(model=Script().model, working_dir=tmp_path, max_cost=1.0, save_sessions=False)
    with pytest.raises(ConfigError, match=r"max_cost: a cost budget needs a model whose price is known"):
        await Agent(config).start()


def test_cost_budgets_are_fields_of_types_and_show_in_a_task_call() -> None:
    assert AgentType.model_validate({"description": "x", "maxCost": 0.5}).max_cost == 0.5
    with pytest.raises(ValueError, match="greater than 0"):
        AgentType.model_validate({"description": "x", "max_cost": 0})
    assert "at most $0.25" in task_call_notes({"prompt": "p", "max_cost": 0.25})


def test_the_sessions_budget_comes_from_the_flag_or_the_environment(tmp_path: Path) -> None:
    from freeact_sub.launch import build_config
    from freeact_sub.terminal.arguments import build_parser

    args = build_parser().parse_args(["--model", "openai:gpt-4.1", "--max-cost", "2.5"])
    assert build_config(args, tmp_path, None).max_cost == 2.5
    from_env = AgentConfig.load(environ={"FREEACT_SUB_MAX_COST": "0.75"})
    assert from_env.max_cost == 0.75
