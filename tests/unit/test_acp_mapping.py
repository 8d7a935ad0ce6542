"""The ACP agent's mappings without a process: a client's answer as this project's decision, events as updates."""

from __future__ import annotations

from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

from freeact_sub import ApprovalPolicy, ApprovalRequest, CodeExecutionOutputChunk, SubagentStarted
from freeact_sub.acp.permissions import answer, options_for
from freeact_sub.acp.updates import EventUpdates


def _request(agent: str, call: str = "c1", tool: str = "execute_ipython_cell") -> ApprovalRequest:
    return ApprovalRequest(agent_id=agent, tool_name=tool, tool_args={"code": "1"}, tool_call_id=call)


def _picked(option: str, reason: str | None = None) -> RequestPermissionResponse:
    meta = {"reason": reason} if reason else None
    return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option, field_meta=meta))


async def test_each_option_is_this_projects_answer() -> None:
    policy = ApprovalPolicy()
    asked, waiting_main, waiting_child = _request("main"), _request("main", "c2"), _request("agent-1")
    assert [o.option_id for o in options_for(asked, "main")] == ["once", "agent", "all", "reject"]
    answer(asked, _picked("agent"), policy, [waiting_main, waiting_child])
    assert asked.decision is True and policy.is_approved("main") and not policy.is_approved("agent-1")
    assert waiting_main.decision is True and not waiting_child.decided  # "always for this agent" covers its own

    answer(waiting_child, _picked("reject", "  use pathlib "), policy, [])
    assert (waiting_child.decision, waiting_child.reason) == (False, "use pathlib")  # the model reads it, goes on

    bare = _request("agent-1", "c3")
    answer(bare, RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled")), policy, [])
    assert (bare.decision, bare.reason) == (False, None)  # cancelled: a bare rejection ends the turn

    everyone, other = _request("agent-2"), _request("agent-3")
    answer(everyone, _picked("all"), policy, [other])
    assert other.decision is True and policy.is_approved("agent-9")


async def test_a_subagents_calls_are_titled_with_its_id_and_type_and_its_output_streams() -> None:
    view = EventUpdates("main")
    [start] = view.updates(ApprovalRequest(agent_id="main", tool_name="task", tool_call_id="t1",
                                           tool_args={"prompt": "count", "description": "primes"}))
    assert (start.kind, start.title, start.status) == ("think", "Start a subagent (general): primes", "pending")
    plan, renamed = view.updates(SubagentStarted(agent_id="main", subagent_id="agent-1", tool_call_id="t1",
                                                 prompt="count", max_turns=4, agent_type="general"))
    assert plan.entries[0].status == "in_progress" and renamed.title == "agent-1 (general): count"
    [cell] = view.updates(_request("agent-1"))
    assert cell.tool_call_id == "agent-1/c1" and cell.title == "agent-1 (general) · Run Python"
    [chunk] = view.updates(CodeExecutionOutputChunk(agent_id="agent-1", content="tick\n", tool_call_id="c1"))
    assert chunk.status == "in_progress" and chunk.content[-1].content.text == "```\ntick\n```"
