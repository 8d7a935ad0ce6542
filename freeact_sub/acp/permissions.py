"""A person's approval as the protocol's permission request, and the client's answer as this project's.

The four answers of the terminal, as permission options:

| option id | kind            | this project's answer                                   |
|-----------|-----------------|---------------------------------------------------------|
| `once`    | `allow_once`    | approve this call                                       |
| `agent`   | `allow_always`  | approve, and always for this agent (`approvals.always`) |
| `all`     | `allow_always`  | approve, and always for every agent (`always_all`)      |
| `reject`  | `reject_once`   | reject; with a reason the model reads it and goes on    |

The protocol's answer has no text field: a client that lets a person type a reason sends it in the
answer's `_meta` as `{"reason": "..."}` (on the outcome or on the response). A `cancelled` outcome
(the client's answer when the turn is cancelled) rejects without a reason, which ends the turn.
"""

from __future__ import annotations

from typing import Any

from acp.schema import PermissionOption, RequestPermissionResponse

from freeact_sub import ApprovalPolicy, ApprovalRequest

__all__ = ["answer", "options_for"]


def options_for(request: ApprovalRequest, who: str) -> list[PermissionOption]:
    """The options a person picks from; `who` names the agent that asks (its id, and its type for a subagent)."""
    return [
        PermissionOption(option_id="once", name="Approve once", kind="allow_once"),
        PermissionOption(option_id="agent", name=f"Always for {who}", kind="allow_always"),
        PermissionOption(option_id="all", name="Always for every agent", kind="allow_always"),
        PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
    ]


def _reason(response: RequestPermissionResponse) -> str | None:
    for meta in (getattr(response.outcome, "field_meta", None), response.field_meta):
        if isinstance(meta, dict) and isinstance(meta.get("reason"), str) and meta["reason"].strip():
            return str(meta["reason"])
    return None


def answer(request: ApprovalRequest, response: RequestPermissionResponse, policy: ApprovalPolicy,
           pending: list[ApprovalRequest]) -> None:
    """Decide `request` as the client answered; a standing decision also approves the `pending` it covers."""
    outcome: Any = response.outcome
    option = getattr(outcome, "option_id", None) if outcome.outcome == "selected" else None
    if option in ("once", "agent", "all"):
        request.approve(True)
    else:
        request.reject(_reason(response) if option == "reject" else None)
        return
    if option == "agent":
        policy.always(request.agent_id)
    elif option == "all":
        policy.always_all()
    else:
        return
    for waiting in pending:
        if not waiting.decided and policy.is_approved(waiting.agent_id):
            waiting.approve(True)
