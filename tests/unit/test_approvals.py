"""Standing approval decisions and agent ids (no kernel needed: the agents are never started)."""

from __future__ import annotations

import re

from freeact_sub import Agent, AgentConfig, ApprovalPolicy


def test_policy_asks_by_default() -> None:
    policy = ApprovalPolicy()
    assert not policy.is_approved("agent-1")
    assert not policy.everything
    assert policy.agent_ids == frozenset()


def test_always_and_clear_one_agent() -> None:
    policy = ApprovalPolicy()
    policy.always("agent-1")
    assert policy.is_approved("agent-1")
    assert not policy.is_approved("agent-2")
    policy.clear("agent-1")
    assert not policy.is_approved("agent-1")
    policy.clear("agent-never-set")  # clearing an unknown id is harmless


def test_always_all_and_clear_all() -> None:
    policy = ApprovalPolicy()
    policy.always("agent-1")
    policy.always_all()
    assert policy.is_approved("agent-anything")
    policy.clear_all()
    assert not policy.is_approved("agent-anything")
    assert not policy.is_approved("agent-1")


def test_clearing_one_agent_leaves_everything_approved() -> None:
    policy = ApprovalPolicy(approve_everything=True)
    policy.always("agent-1")
    policy.clear("agent-1")
    assert policy.is_approved("agent-1")


def test_agent_ids_are_short_hex_and_unique_in_the_process() -> None:
    config = AgentConfig(model="test", enable_subagents=False)
    ids = [Agent(config).agent_id for _ in range(2000)]
    assert all(re.fullmatch(r"agent-[0-9a-f]+", agent_id) for agent_id in ids)
    assert len(set(ids)) == len(ids)
    assert max(len(agent_id) for agent_id in ids) <= len("agent-") + 8


def test_an_explicit_agent_id_is_kept() -> None:
    assert Agent(AgentConfig(model="test"), agent_id="agent-mine").agent_id == "agent-mine"


def test_auto_approve_config_approves_every_agent() -> None:
    agent = Agent(AgentConfig(model="test", auto_approve=True))
    assert agent.approvals.is_approved(agent.agent_id)
    assert agent.approvals.is_approved("agent-other")


def test_agents_can_share_one_policy() -> None:
    policy = ApprovalPolicy()
    first = Agent(AgentConfig(model="test"), approvals=policy)
    second = Agent(AgentConfig(model="test"), approvals=policy)
    policy.always(second.agent_id)
    assert not first.approvals.is_approved(first.agent_id)
    assert first.approvals.is_approved(second.agent_id)


def test_subscribers_hear_every_change_until_they_unsubscribe() -> None:
    policy = ApprovalPolicy()
    seen: list[tuple[bool, frozenset[str]]] = []
    unsubscribe = policy.subscribe(lambda: seen.append((policy.everything, policy.agent_ids)))
    policy.always("agent-1")
    policy.clear("agent-1")
    policy.always_all()
    policy.clear_all()
    assert seen == [
        (False, frozenset({"agent-1"})),
        (False, frozenset()),
        (True, frozenset()),
        (False, frozenset()),
    ]
    unsubscribe()
    policy.always("agent-2")
    assert len(seen) == 4
