"""Event types: a common base carrying `agent_id`, frozen dataclasses, and the approval future."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import threading
from pathlib import Path

import pytest

import freeact_sub
from freeact_sub import events
from freeact_sub.events import AgentEvent, ApprovalRequest, CodeExecutionOutput


def _event_classes() -> list[type]:
    return [
        obj
        for name in events.__all__
        if inspect.isclass(obj := getattr(events, name)) and dataclasses.is_dataclass(obj)
    ]


def test_every_event_type_derives_from_agent_event_and_is_frozen() -> None:
    classes = _event_classes()
    names = {cls.__name__ for cls in classes}
    assert {
        "ApprovalRequest",
        "CodeExecutionOutput",
        "CodeExecutionOutputChunk",
        "Response",
        "ResponseChunk",
        "Thoughts",
        "ThoughtsChunk",
        "ToolOutput",
        "RunCancelled",
    } <= names
    for cls in classes:
        assert issubclass(cls, AgentEvent), cls
        assert cls.__dataclass_params__.frozen, cls  # type: ignore[attr-defined]
        assert "agent_id" in {f.name for f in dataclasses.fields(cls)}, cls


def test_events_are_exported_by_the_package() -> None:
    for cls in _event_classes():
        if cls.__name__ in freeact_sub.__all__:
            assert getattr(freeact_sub, cls.__name__) is cls
    assert freeact_sub.AgentEvent is AgentEvent
    assert freeact_sub.ApprovalRequest is ApprovalRequest


def test_an_event_cannot_be_changed() -> None:
    event = CodeExecutionOutput(agent_id="agent-1", content="hi", tool_call_id="c1", images=(Path("a.png"),))
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.content = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.agent_id = "agent-2"  # type: ignore[misc]


def test_agent_id_is_required() -> None:
    with pytest.raises(TypeError):
        events.ResponseChunk(content="x")  # type: ignore[call-arg]


def test_events_dispatch_with_match() -> None:
    event: AgentEvent = events.ResponseChunk(agent_id="agent-1", content="hel")
    match event:
        case events.ResponseChunk(agent_id=agent, content=text):
            assert (agent, text) == ("agent-1", "hel")
        case _:
            pytest.fail("not matched")


async def test_approval_request_resolves_with_the_decision() -> None:
    request = ApprovalRequest(
        agent_id="agent-1", tool_name="execute_ipython_cell", tool_args={"code": "1"}, tool_call_id="c"
    )
    assert not request.decided
    waiter = asyncio.create_task(request.approved())
    await asyncio.sleep(0)
    assert not waiter.done()
    request.approve(True)
    assert await waiter is True
    assert request.decided


async def test_rejecting_and_later_decisions_are_ignored() -> None:
    request = ApprovalRequest(agent_id="agent-1", tool_name="reset_kernel", tool_args={}, tool_call_id="c")
    request.reject()
    request.approve(True)  # too late: the first decision stands
    assert await request.approved() is False


async def test_approve_defaults_to_true_and_accepts_truthy_values() -> None:
    first = ApprovalRequest(agent_id="a", tool_name="reset_kernel", tool_args={}, tool_call_id="1")
    first.approve()
    second = ApprovalRequest(agent_id="a", tool_name="reset_kernel", tool_args={}, tool_call_id="2")
    second.approve(0)  # type: ignore[arg-type]
    assert await first.approved() is True
    assert await second.approved() is False


async def test_approve_from_another_thread() -> None:
    request = ApprovalRequest(agent_id="agent-1", tool_name="reset_kernel", tool_args={}, tool_call_id="c")
    thread = threading.Thread(target=request.approve, args=(True,))
    thread.start()
    assert await asyncio.wait_for(request.approved(), 10) is True
    thread.join()


async def test_cancelling_a_waiter_does_not_decide_the_request() -> None:
    request = ApprovalRequest(agent_id="agent-1", tool_name="reset_kernel", tool_args={}, tool_call_id="c")
    waiter = asyncio.create_task(request.approved())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert not request.decided
    request.approve(True)
    assert await request.approved() is True


async def test_code_property_only_for_cells() -> None:
    cell = ApprovalRequest(
        agent_id="a", tool_name="execute_ipython_cell", tool_args={"code": "x = 1"}, tool_call_id="1"
    )
    mcp = ApprovalRequest(agent_id="a", tool_name="calc_echo", tool_args={"code": "not code"}, tool_call_id="2")
    assert cell.code == "x = 1"
    assert mcp.code is None


async def test_approval_requests_compare_by_content_not_by_future() -> None:
    one = ApprovalRequest(agent_id="a", tool_name="reset_kernel", tool_args={}, tool_call_id="1")
    two = ApprovalRequest(agent_id="a", tool_name="reset_kernel", tool_args={}, tool_call_id="1")
    assert one == two
    assert "_decision" not in repr(one)


async def test_a_rejection_carries_its_reason() -> None:
    request = ApprovalRequest(agent_id="a", tool_name="reset_kernel", tool_args={}, tool_call_id="1")
    assert request.reason is None  # nothing decided yet
    request.reject("  use pathlib, not os.system ")
    assert request.decided and request.reason == "use pathlib, not os.system"
    assert await request.approved() is False
    request.reject("another reason")  # later decisions change nothing, the reason included
    assert request.reason == "use pathlib, not os.system"


async def test_approve_false_with_a_reason_and_blank_reasons() -> None:
    with_reason = ApprovalRequest(agent_id="a", tool_name="reset_kernel", tool_args={}, tool_call_id="1")
    with_reason.approve(False, "not now")
    blank = ApprovalRequest(agent_id="a", tool_name="reset_kernel", tool_args={}, tool_call_id="2")
    blank.reject("   ")
    bare = ApprovalRequest(agent_id="a", tool_name="reset_kernel", tool_args={}, tool_call_id="3")
    bare.reject()
    assert (with_reason.reason, blank.reason, bare.reason) == ("not now", None, None)
    assert [await r.approved() for r in (with_reason, blank, bare)] == [False, False, False]


async def test_a_reason_given_from_another_thread_is_visible_at_once() -> None:
    request = ApprovalRequest(agent_id="a", tool_name="reset_kernel", tool_args={}, tool_call_id="1")
    thread = threading.Thread(target=request.reject, args=("too slow",))
    thread.start()
    thread.join()
    assert request.decided and request.reason == "too slow"  # before the loop has run the settlement
    assert await asyncio.wait_for(request.approved(), 10) is False


@pytest.mark.parametrize(
    ("old", "new"), [("HookError", "HookFailed"), ("TurnCancelled", "RunCancelled"), ("AgentDefinition", "AgentType")]
)
def test_renamed_classes_still_import_under_their_old_names_with_a_warning(old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=new):
        from_root = getattr(freeact_sub, old)
    assert from_root is getattr(freeact_sub, new)
    assert old not in freeact_sub.__all__
    if old != "AgentDefinition":  # an event: importable from the events package too
        with pytest.warns(DeprecationWarning):
            assert getattr(freeact_sub.events, old) is from_root
    with pytest.raises(AttributeError):
        freeact_sub.NoSuchName  # noqa: B018


@pytest.mark.parametrize(
    "event",
    [
        freeact_sub.SubagentStarted(
            agent_id="a", subagent_id="b", tool_call_id="1", prompt="p", max_turns=3, agent_type="explore"
        ),
        freeact_sub.SubagentQueued(agent_id="a", subagent_id="b", tool_call_id="1", prompt="p", agent_type="explore"),
    ],
)
def test_a_childs_type_still_reads_under_its_old_name_subagent_type_with_a_warning(event: AgentEvent) -> None:
    # programs of the last release read `event.subagent_type` (or match on it): they must still work, warned
    with pytest.warns(DeprecationWarning, match=r"subagent_type is deprecated, use \.agent_type"):
        assert event.subagent_type == "explore"  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning):
        match event:
            case freeact_sub.SubagentStarted(subagent_type="explore") | freeact_sub.SubagentQueued(
                subagent_type="explore"
            ):
                matched = True
            case _:
                matched = False
    assert matched
