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
    assert (start.kind, start.title, start.status) == ("think", "main (main) · Start a subagent (general): primes",
                                                       "pending")
    plan, renamed = view.updates(SubagentStarted(agent_id="main", subagent_id="agent-1", tool_call_id="t1",
                                                 prompt="count", max_turns=4, agent_type="general"))
    assert plan.entries[0].status == "in_progress" and renamed.title == "agent-1 (general): count"
    [cell] = view.updates(_request("agent-1"))
    assert cell.tool_call_id == "agent-1/c1" and cell.title == "agent-1 (general) · Run Python"
    [chunk] = view.updates(CodeExecutionOutputChunk(agent_id="agent-1", content="tick\n", tool_call_id="c1"))
    assert chunk.status == "in_progress" and chunk.content[-1].content.text == "```\ntick\n```"


async def test_a_cells_code_is_its_raw_input_command_and_the_main_agents_calls_are_titled() -> None:
    """JupyterLab's chat shows an `execute` call's `rawInput.command` on the card a person approves (issue 40, item
    30); the main agent's calls are titled with its id as the children's are with theirs (item 36)."""
    view = EventUpdates("agent-main")
    code = "import math\nprint(math.pi)"
    [cell] = view.updates(ApprovalRequest(agent_id="agent-main", tool_name="execute_ipython_cell", tool_call_id="c1",
                                          tool_args={"code": code}))
    assert cell.raw_input == {"code": code, "command": code} and cell.kind == "execute"
    assert cell.title == "agent-main (main) · Run Python"
    assert view.calls["agent-main/c1"].raw_input["command"] == code  # what the permission request carries too
    [call] = view.updates(ApprovalRequest(agent_id="agent-main", tool_name="demo_constant", tool_call_id="c2",
                                          tool_args={"name": "pi"}))
    assert call.raw_input == {"name": "pi"} and call.title == "agent-main (main) · Call demo_constant"


async def test_with_child_sessions_a_childs_calls_and_words_go_on_its_own_session_after_its_announcement() -> None:
    """Issue 40, item 21, without a process: where each update goes, and what announces and links a child."""
    from acp.schema import ToolCallProgress

    from freeact_sub import Response, SubagentFinished
    from freeact_sub.acp.child_sessions import ChildSessions

    view, children = EventUpdates("main", child_sessions=True), ChildSessions("s1", "main")
    view.updates(ApprovalRequest(agent_id="main", tool_name="task", tool_call_id="t1", tool_args={"prompt": "count"}))
    started = SubagentStarted(agent_id="main", subagent_id="agent-1", tool_call_id="t1", prompt="count", max_turns=4,
                              agent_type="general")
    parent, announced = children.announce(started, "main/t1")
    assert parent == "s1" and announced == {
        "sessionUpdate": "subagent_update", "sessionId": "s1:agent-1", "title": "agent-1 (general)",
        "description": "count", "capabilities": {"cancel": {}}, "state": {"state": "running"},
        "_meta": {"freeact-sub": {"agent_id": "agent-1", "agent_type": "general", "model": None}}}
    plan, renamed = view.updates(started)
    assert children.target(plan, "main") == "s1" and children.target(renamed, "main") == "s1"
    linked = children.with_link(renamed, view.calls["main/t1"].content())
    assert linked is not None and linked["content"][-1] == {"type": "session", "sessionId": "s1:agent-1"}
    assert linked["content"][0]["content"]["text"] == "count"  # the call keeps what it showed
    [cell] = view.updates(_request("agent-1"))
    assert children.target(cell, "agent-1") == "s1:agent-1"
    [said] = view.updates(Response(agent_id="agent-1", content="There are 3."))
    assert said.session_update == "agent_message_chunk" and children.target(said, "agent-1") == "s1:agent-1"
    assert not view.calls["main/t1"].notes  # the child's words are its session's, not notes in its `task` call
    assert children.state("agent-1", "requires_action") == (
        "s1", {"sessionUpdate": "subagent_update", "sessionId": "s1:agent-1", "state": {"state": "requires_action"}})
    ended = children.finished(SubagentFinished(agent_id="main", subagent_id="agent-1", tool_call_id="t1",
                                               status="cancelled", turns_used=1, elapsed=0.5))
    assert ended is not None and ended[1]["state"] == {"state": "idle", "stopReason": "cancelled"}
    assert children.with_link(ToolCallProgress(session_update="tool_call_update", tool_call_id="main/c9"), []) is None


def test_the_trust_questions_answers() -> None:
    """Issue 40, item 29: the chat's three answers, and a cancelled question (asked again at the next prompt)."""
    from freeact_sub.acp.trust import choice, trust_options

    assert [(o.option_id, o.kind) for o in trust_options()] == [
        ("trust", "allow_always"), ("session", "allow_once"), ("without", "reject_once")]
    assert [choice(_picked(option)) for option in ("trust", "session", "without", "reject")] == [
        "trust", "session", "without", "without"]
    assert choice(RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))) == "cancelled"
