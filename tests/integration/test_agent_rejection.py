"""Rejecting a call with a reason: the call does not run, the model reads the reason, the turn goes on."""

from __future__ import annotations

import pytest

from freeact_sub import ApprovalRequest, CodeExecutionOutput, Response
from tests.scripting import Call, drive, of, shared_agent

pytestmark = pytest.mark.asyncio(loop_scope="module")


shared = shared_agent("rejection")


def _reject_with(reason: str | None, only: str | None = None):
    def decide(request: ApprovalRequest) -> bool | None:
        if only is not None and request.tool_call_id != only:
            return True
        request.reject(reason)
        return None

    return decide


async def test_a_reason_goes_to_the_model_and_the_turn_goes_on(shared) -> None:
    agent, script = shared
    marker = agent.config.working_dir / "ran"  # where the kernel's sandbox lets it write
    marker.unlink(missing_ok=True)
    script.reset(
        [Call("execute_ipython_cell", {"code": f"import os; os.system('touch {marker}')"}, id="bad")],
        [Call("execute_ipython_cell", {"code": f"import pathlib; pathlib.Path({str(marker)!r}).touch()"}, id="good")],
        ["Done with pathlib."],
    )
    reason = "use pathlib, not os.system"
    events = await drive(agent.stream("Touch a file"), decide=_reject_with(reason, only="bad"))

    assert script.calls == 3  # the model was asked again after the rejection
    result = script.tool_results(1)["bad"]
    assert "rejected" in result and "user" in result and f'"{reason}"' in result
    assert "did not run" in result
    assert [o.tool_call_id for o in of(CodeExecutionOutput, events)] == ["good"]  # the rejected cell never ran
    assert marker.exists()
    assert [r.content for r in of(Response, events) if r.final] == ["Done with pathlib."]
    assert not agent.turns.last_turn_rejected
    request = next(e for e in of(ApprovalRequest, events) if e.tool_call_id == "bad")
    assert request.reason == reason


async def test_a_bare_rejection_still_ends_the_turn(shared) -> None:
    agent, script = shared
    script.reset([Call("reset_kernel", {}, id="r")])
    events = await drive(agent.stream("Reset"), decide=_reject_with(None))
    assert script.calls == 1
    assert agent.turns.last_turn_rejected
    assert events[-1].final and "rejected" in events[-1].content  # type: ignore[attr-defined]


async def test_a_reason_on_one_of_two_calls(shared) -> None:
    """A rejection with a reason next to an approved call: both results go back, and the model goes on."""
    agent, script = shared
    script.reset(
        [Call("execute_ipython_cell", {"code": "print('ran')"}, id="yes"), Call("reset_kernel", {}, id="no")],
        ["Kept the kernel."],
    )
    await drive(agent.stream("Two calls"), decide=_reject_with("keep my variables", only="no"))
    results = script.tool_results(1)
    assert results["yes"] == "ran\n"
    assert '"keep my variables"' in results["no"]
    assert not agent.turns.last_turn_rejected
