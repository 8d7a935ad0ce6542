"""A tool call that waits for a decision: `ApprovalRequest`, answered from any thread."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..workspaces import ChangeSet
from .base import AgentEvent, CallSource

__all__ = ["ApprovalRequest"]


def _new_decision() -> asyncio.Future[bool]:
    return asyncio.get_running_loop().create_future()


class _Verdict:
    """The first decision made on a request, recorded at once under a lock (any thread may decide)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value: tuple[bool, str | None] | None = None
        self.at: float | None = None
        """When the decision was made (`time.time()`)."""

    def claim(self, decision: bool, reason: str | None, at: float | None = None) -> bool:
        """Record the decision unless one was made already; True if this call decided."""
        with self._lock:
            if self.value is not None:
                return False
            self.value = (decision, reason)
            self.at = time.time() if at is None else at
            return True


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest(AgentEvent):
    """A tool call that runs only once it is approved.

    Answer it with `approve()` or `reject()`; the agent that asked waits until then. A bare
    rejection ends the agent's turn; a rejection with a reason (`reject("use pathlib")`) is
    sent to the model as the call's result, and the turn goes on so the model can adjust.
    A request decided by a standing approval (see `Agent.approvals`) arrives already decided:
    `auto_approved` is true and `approve()` does nothing.
    """

    tool_name: str
    """The tool the model calls: `execute_ipython_cell`, `reset_kernel`, `task` or `<server>_<tool>`."""
    tool_args: dict[str, Any]
    """The validated arguments, e.g. `{"code": "..."}` for `execute_ipython_cell`."""
    tool_call_id: str
    """Id of the tool call; the output events of the call carry the same id."""
    auto_approved: bool = False
    """True when a standing approval decided this request before it was emitted."""
    source: CallSource = "model"
    """`"model"` for a tool call of the model; `"code"` for an MCP tool called from a cell's code."""
    cell_call_id: str | None = None
    """For a call from code: the `tool_call_id` of the `execute_ipython_cell` call whose cell made it."""
    hook: str | None = None
    """The `PreToolUse` hook that decided this request (allow / deny) or rewrote its arguments; None if none did."""
    rule: str | None = None
    """The approval rule that decided this request without asking anyone, e.g. `'files_write_*': deny
    (agent type reviewer)`; None when a person or a standing decision decides. An `allow` rule's
    request arrives approved (`auto_approved` true), a `deny` rule's rejected."""
    changes: ChangeSet | None = None
    """For `apply_changes` (a subagent with a workspace of its own ended): its change set, file by file, each with
    its diff and any conflict. Set a file's `apply` to False before approving to leave that file out."""
    _decision: asyncio.Future[bool] = field(default_factory=_new_decision, repr=False, compare=False)
    _verdict: _Verdict = field(default_factory=_Verdict, repr=False, compare=False)

    def approve(self, decision: bool = True, reason: str | None = None, *, at: float | None = None) -> None:
        """Decide the request: True runs the call, False rejects it. Only the first decision counts.

        `reason` goes with a rejection: the model receives it as the call's result and the turn
        goes on. Without a reason (or with a blank one) a rejection ends the turn. Safe to call
        from any thread (e.g. a widget callback); `decided` and `reason` reflect the decision
        at once. `at` is when it was decided (default now; a replayed request passes the saved time).
        """
        text = reason.strip() if isinstance(reason, str) else None
        if not self._verdict.claim(bool(decision), text or None, at):
            return
        loop = self._decision.get_loop()
        try:
            same_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            same_loop = False
        if same_loop:
            self._settle(bool(decision))
        elif not loop.is_closed():
            loop.call_soon_threadsafe(self._settle, bool(decision))

    def _settle(self, decision: bool) -> None:
        if not self._decision.done():
            self._decision.set_result(decision)

    def reject(self, reason: str | None = None) -> None:
        """Same as `approve(False, reason)`: with a reason the model is told it and goes on."""
        self.approve(False, reason)

    @property
    def decided(self) -> bool:
        """Whether a decision has been made."""
        return self._verdict.value is not None

    @property
    def decision(self) -> bool | None:
        """True once approved, False once rejected, None while undecided."""
        verdict = self._verdict.value
        return verdict[0] if verdict is not None else None

    @property
    def decided_at(self) -> float | None:
        """When the decision was made (seconds since the epoch); None while undecided."""
        return self._verdict.at

    @property
    def reason(self) -> str | None:
        """The reason given with the decision; None until decided, or when none was given."""
        verdict = self._verdict.value
        return verdict[1] if verdict is not None else None

    async def approved(self) -> bool:
        """Wait for the decision and return it."""
        return await asyncio.shield(self._decision)

    @property
    def code(self) -> str | None:
        """The code of an `execute_ipython_cell` call, else None."""
        code = self.tool_args.get("code") if self.tool_name == "execute_ipython_cell" else None
        return code if isinstance(code, str) else None
