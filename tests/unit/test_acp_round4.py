"""Issue 40's ACP items that are mappings: separate model turns stay separate paragraphs, a cancelled turn's calls
end `failed` (live and on replay), and long plan entries and task titles end with an ellipsis."""

from __future__ import annotations

from freeact_sub import (
    ApprovalRequest,
    CodeExecutionOutput,
    CodeExecutionOutputChunk,
    Response,
    ResponseChunk,
    SubagentQueued,
    SubagentStarted,
    ToolOutput,
)
from freeact_sub.acp.updates import EventUpdates


def _text(update: object) -> str:
    return update.content.text  # type: ignore[attr-defined]


def test_two_model_responses_of_a_turn_are_two_paragraphs() -> None:
    view = EventUpdates("main")
    said = [view.updates(ResponseChunk(agent_id="main", content="Here is a small image."))[0]]
    assert view.updates(Response(agent_id="main", content="Here is a small image.")) == []
    said += view.updates(ResponseChunk(agent_id="main", content="## Results"))
    said += view.updates(ResponseChunk(agent_id="main", content=" follow"))
    assert "".join(map(_text, said)) == "Here is a small image.\n\n## Results follow"
    view.new_turn()  # the next prompt's answer starts afresh
    assert _text(view.updates(ResponseChunk(agent_id="main", content="Next."))[0]) == "Next."


async def test_a_cancelled_turns_calls_end_failed_and_so_does_their_replay() -> None:
    view = EventUpdates("main")
    cell = ApprovalRequest(agent_id="main", tool_name="execute_ipython_cell", tool_call_id="c1",
                           tool_args={"code": "import time; time.sleep(60)"})
    cell.approve(True)
    asked = ApprovalRequest(agent_id="main", tool_name="demo_constant", tool_call_id="c2", tool_args={})
    done = ApprovalRequest(agent_id="main", tool_name="demo_constant", tool_call_id="c3", tool_args={})
    background = ApprovalRequest(agent_id="agent-bg", tool_name="demo_constant", tool_call_id="c4", tool_args={})
    for request in (cell, asked, done, background):
        view.updates(request)
    view.updates(CodeExecutionOutputChunk(agent_id="main", tool_call_id="c1", content="tick\n"))
    view.updates(ToolOutput(agent_id="main", tool_name="demo_constant", tool_call_id="c3", content="3.14"))
    ended = view.interrupted(spare={"agent-bg"})
    assert [(u.tool_call_id, u.status) for u in ended] == [("main/c1", "failed"), ("main/c2", "failed")]
    assert "tick" in _text(ended[0].content[-1]) and "Interrupted" in _text(ended[0].content[-1])
    assert view.calls["agent-bg/c4"].status == "pending"  # a background subagent's question stays open
    assert view.interrupted() and view.interrupted() == []  # each call is ended once

    replayed = EventUpdates("main")  # `session/load`: the saved result says the call was interrupted
    replayed.updates(cell)
    [update] = replayed.updates(CodeExecutionOutput(agent_id="main", tool_call_id="c1", content=(
        "The user interrupted this call while it was running. What it did before that stays done")))
    assert update.status == "failed"


async def test_long_plan_entries_and_task_titles_end_with_an_ellipsis_and_keep_a_summary() -> None:
    view = EventUpdates("main")
    job = "Write a sieve of Eratosthenes in Python and count the primes below one million, then time it"
    [plan] = view.updates(SubagentQueued(agent_id="main", subagent_id="agent-1", tool_call_id="t1", prompt=job,
                                         agent_type="general"))
    entry = plan.entries[0].content
    assert entry.endswith("…") and len(entry) <= len("agent-1 (general): ") + 80
    assert "Eratosthenes in Python" in entry and not entry.endswith("Pyt…")
    [start] = view.updates(ApprovalRequest(agent_id="main", tool_name="task", tool_call_id="t1",
                                           tool_args={"prompt": job}))
    assert start.title.startswith("main (main) · Start a subagent (general): Write a sieve")
    assert start.title.endswith("…")
    _, renamed = view.updates(SubagentStarted(agent_id="main", subagent_id="agent-1", tool_call_id="t1", prompt=job,
                                              max_turns=4, agent_type="general"))
    assert renamed.title.startswith("agent-1 (general): Write a sieve of") and renamed.title.endswith("…")
