"""What a parent reads of a child: its result (done, failed, stopped, rejected, at its limit) and the notes that
start a resumed or forked child."""

from __future__ import annotations

import json
from typing import Any

from ..events import ApprovalRequest, SubagentStatus
from ..tree.registry import TreeMember

__all__ = ["FORK_NOTE", "RESUME_INTERRUPTED_NOTE", "RESUME_NOTE", "ended_cleanly", "outcome", "rejected_result",
           "stopped_result", "unpriced"]

FORK_NOTE = (
    "[You are a fork of {parent}: the conversation above is a copy of its conversation up to the moment it "
    "started you. Your IPython kernel is new: the variables, imports and definitions of that conversation are "
    "gone. Work on the job below and answer with your result.]"
)
RESUME_NOTE = (
    "[You are resumed after you had finished: your IPython kernel is new, so the variables, imports and "
    "definitions of your earlier work are gone (files you wrote remain).]"
)
RESUME_INTERRUPTED_NOTE = (
    "[You are resumed after your work was cut short before you finished (the session ended, or you were "
    "stopped): a call that was running then may have done part of its work. Your IPython kernel is new, so the "
    "variables, imports and definitions of your earlier work are gone (files you wrote remain).]"
)

def unpriced(model: Any, own_budget: float | None, tree_budget: float | None) -> str | None:
    """Why a child on `model` cannot start under a cost budget (its price is unknown), or None."""
    if own_budget is None and tree_budget is None:
        return None
    from ..usage import model_is_priced

    if model_is_priced(model):
        return None
    name = getattr(model, "model_name", str(model))
    whose = "this call's (or its type's) `max_cost`" if own_budget is not None else "the session's cost budget"
    return (
        f"No subagent started: {whose} cannot be held, because the price of the model {name!r} is unknown "
        "(a local or scripted model, or one the price table lacks). Use `max_tokens` instead."
    )


def ended_cleanly(history: list[Any]) -> bool:
    """Whether a saved conversation ends with the agent's final answer (not cut short by a crash or a stop)."""
    from pydantic_ai.messages import ModelResponse

    if not history or not isinstance(last := history[-1], ModelResponse):
        return False
    return not any(part.part_kind == "tool-call" for part in last.parts)


def outcome(
    child: TreeMember, answer: str, requests: list[ApprovalRequest], max_turns: int
) -> tuple[SubagentStatus, tuple[str, bool]]:
    """How a child's turn ended: its status, and the result its parent reads (and whether that is an error)."""
    if child.turns.last_turn_rejected:
        return "rejected", (rejected_result(child.agent_id, requests), True)
    if child.turns.turn_limit_reached:
        budget = child.turns.budget_reached
        if budget:
            why = f"[The subagent {child.agent_id} was stopped: {budget}.]"
        else:
            turns = f"{max_turns} turn{'s' if max_turns != 1 else ''}"
            why = f"[The subagent {child.agent_id} reached its limit of {turns}.]"
        return "turn_limit", (f"{why}\n{_without_stop_note(answer)}".strip(), True)
    if not answer.strip():
        return "done", (f"The subagent {child.agent_id} finished, but its final response was empty.", False)
    return "done", (answer, False)


def _without_stop_note(answer: str) -> str:
    """The child's last text without the `[Stopped: …]` line its own turn added (the parent's note says it once)."""
    text = answer.rstrip()
    if text.endswith("]") and "[Stopped: " in text:
        text = text[: text.rindex("[Stopped: ")]
    return text.rstrip()


def stopped_result(child_id: str, by: str | None, said: str) -> str:
    text = f"[{(by or 'the user').capitalize()} stopped the subagent {child_id} before it finished its task.]"
    return f"{text}\nWhat it had said so far:\n{said.strip()}" if said.strip() else text


def rejected_result(child_id: str, requests: list[ApprovalRequest]) -> str:
    """What the parent reads when the user rejected a call of its child: who, what, and that the job is unfinished."""
    rejected = [r for r in requests if r.decision is False and r.reason is None]
    described = []
    for request in rejected:
        what = f"`{request.tool_name}`"
        if request.code is not None:
            code = request.code if len(request.code) <= 300 else request.code[:300] + " …"
            what += f" with the code:\n```python\n{code}\n```"
        elif request.tool_args:
            what += f" with the arguments {json.dumps(request.tool_args)[:300]}"
        described.append(what)
    calls = "; ".join(described) if described else "one of its calls"
    return (
        f"The user rejected the subagent {child_id}'s call to {calls}. The call did not run, and the "
        f"subagent stopped without finishing its task."
    )
