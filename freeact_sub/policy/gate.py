"""The gate every tool call passes: hooks, approval rules and standing decisions, then the person.

`ApprovalGate.ask` emits a call's `ApprovalRequest` and returns it once decided: a hook's or a
rule's verdict decides at once, a standing decision ("approve everything from this agent")
approves it, else the consumer decides. How it was decided, and by whom, is saved for the
session's replay. `after` lets the `PostToolUse` hooks add their notes to a result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..events import ApprovalRequest, CallSource, Emit, HookFailed
from .hooks import HookAnswer, Hooks, pre_tool_verdict

if TYPE_CHECKING:
    from ..tools import Toolbox
    from ..workspaces import ChangeSet
    from .approvals import ApprovalPolicy, ApprovalRules

__all__ = ["ApprovalGate"]



class ApprovalGate:
    """Decides whether one agent's calls run: its hooks, its rules, the tree's standing decisions, the person."""

    def __init__(
        self,
        *,
        agent_id: str,
        approvals: ApprovalPolicy,
        toolbox: Toolbox,
        rules: ApprovalRules | None = None,
        hooks: Hooks | None = None,
        hook_context: Callable[[], dict[str, Any]] | None = None,
        record: Callable[[dict[str, Any]], None] | None = None,
        stopped_by: Callable[[], str | None] | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.approvals = approvals
        """Standing decisions, shared by the tree."""
        self.toolbox = toolbox
        """The agent's tools: a hook's rewrite of a call's arguments must fit its tool."""
        self.rules = rules
        """Allow / ask / deny rules by tool pattern, applied before anyone is asked."""
        self.hooks = hooks
        """The agent's hooks: `PreToolUse` before rules and approval, `PostToolUse` on each result."""
        self.hook_context = hook_context or (lambda: {"agent_id": agent_id})
        """Who asks (agent id, parent, type, session, folder): the common fields of every hook's payload."""
        self.record = record
        """Saves what the live view shows that the transcript does not hold (decisions, calls from code)."""
        self._stopped_by = stopped_by or (lambda: None)
        """Who stopped this agent, if someone did (a question left open by a stop is saved as such)."""

    async def hook(
        self, moment: str, fields: dict[str, Any], emit: Emit, *, tool_name: str, call_id: str
    ) -> list[HookAnswer]:
        assert self.hooks is not None
        return await self.hooks.ask(moment, self.hook_context(), fields, emit, tool_name=tool_name, call_id=call_id)

    async def after(self, name: str, arguments: dict[str, Any], call_id: str, content: Any, emit: Emit) -> Any:
        """`PostToolUse`: the hooks see the result; their notes are added to what the model gets."""
        text = content if isinstance(content, str) else str(getattr(content, "text", content))
        answers = await self.hook("PostToolUse", {"tool_name": name, "tool_input": arguments,
                                                    "tool_response": text, "tool_use_id": call_id},
                                   emit, tool_name=name, call_id=call_id)
        notes = [f"[hook {a.hook}] {a.note}" for a in answers if a.note]
        if not notes:
            return content
        if isinstance(content, str):
            return content + "\n" + "\n".join(notes)
        return [*content, *notes] if isinstance(content, list) else content

    async def ask(
        self,
        name: str,
        arguments: dict[str, Any],
        call_id: str,
        emit: Emit,
        *,
        source: CallSource = "model",
        cell_call_id: str | None = None,
        granted: bool = False,
        changes: ChangeSet | None = None,
    ) -> ApprovalRequest:
        """Emit the `ApprovalRequest` for a call; returns it once decided.

        A `deny` rule rejects it and an `allow` rule approves it at once (nobody is asked); with
        no rule (or `ask`) a standing decision approves it, else the consumer decides. `granted`: the
        person approved it already as part of a batch (subagents from code): it is approved like under a
        standing decision, still after hooks and rules. `changes`: the change set an `apply_changes` request is about.
        """
        verdict = None
        if self.hooks is not None and self.hooks.wants("PreToolUse"):
            verdict = await self._before(name, arguments, call_id, emit)
            if verdict is not None and verdict.tool_input is not None:
                arguments = verdict.tool_input
        # A hook's deny wins; a deny rule still wins over a hook's allow; a hook's allow over an allow rule.
        hook_says = verdict.decision if verdict is not None else None
        match = self.rules.match(name) if self.rules is not None else None
        if hook_says == "deny" or (match is not None and match.rule == "deny"):
            decision: bool | None = False
        elif hook_says == "allow" or (match is not None and match.rule == "allow"):
            decision = True
        else:
            decision = True if granted or self.approvals.is_approved(self.agent_id) else None
        by_rule = match is not None and match.rule != "ask" and hook_says != "deny" and not (
            hook_says == "allow" and match.rule == "allow"
        )
        by_hook = verdict is not None and (hook_says in ("allow", "deny") or verdict.tool_input is not None)
        request = ApprovalRequest(
            agent_id=self.agent_id, tool_name=name, tool_args=arguments, tool_call_id=call_id,
            auto_approved=decision is True, source=source, cell_call_id=cell_call_id, changes=changes,
            rule=str(match) if by_rule else None, hook=verdict.hook if by_hook and verdict is not None else None,
        )
        if decision is False and hook_says == "deny":
            assert verdict is not None
            request.approve(False, verdict.reason or "a hook refused it")
        elif decision is False:
            request.approve(False, f"an approval rule refuses it ({match})")
        elif decision is True:
            request.approve(True)
        emit(request)
        at_once = request.decided
        standing: list[bool] = []
        """Whether the request was decided already when a standing decision came to cover its agent."""

        def policy_changed() -> None:
            if not standing and self.approvals.is_approved(self.agent_id):
                standing.append(request.decided)  # decided already: the person's own answer came with it

        unsubscribe = None if at_once else self.approvals.subscribe(policy_changed)
        try:
            if at_once:
                await request.approved()
            else:
                with self.approvals.asking(self.agent_id):
                    await request.approved()
        except BaseException:
            cancelled = not request.decided
            request.reject()  # the turn ended while the request was pending: nobody should wait on it any more
            if cancelled:
                self._save_decision(request, "cancelled",
                                    arguments_changed=verdict is not None and verdict.tool_input is not None)
            raise
        finally:
            if unsubscribe is not None:
                unsubscribe()
        if at_once:
            by = "hook" if request.hook and hook_says in ("allow", "deny") else "rule" if request.rule else "auto"
        elif (standing and not standing[0]) or (not standing and request.decision
                                                and self.approvals.is_approved(self.agent_id)):
            by = "standing"
        else:
            by = "person"
        self._save_decision(request, by, arguments_changed=verdict is not None and verdict.tool_input is not None,
                            covered=bool(standing) and not standing[0])
        return request

    def _save_decision(self, request: ApprovalRequest, by: str, *, arguments_changed: bool = False,
                       covered: bool = False) -> None:
        """Save how a request was decided and by whom, for `sessions show` to tell it as the live view did."""
        if self.record is None:
            return
        record: dict[str, Any] = {"kind": "decision", "call": request.tool_call_id, "approved": request.decision,
                                  "by": by, "reason": request.reason, "rule": request.rule, "hook": request.hook}
        if by == "cancelled":
            record["approved"] = None
            record["stopped_by"] = self._stopped_by()
        if by == "person" and request.decision:
            policy = self.approvals
            record["always"] = "all" if policy.everything else "agent" if policy.is_approved(self.agent_id) else None
        if by == "standing":
            record["covered"] = covered
        if request.source == "code" or arguments_changed:
            record.update(tool=request.tool_name, args=request.tool_args, source=request.source,
                          cell=request.cell_call_id)
        try:
            self.record(record)
        except (OSError, ValueError, TypeError):
            pass  # a record the live view showed; the run goes on without it

    async def _before(self, name: str, arguments: dict[str, Any], call_id: str, emit: Emit) -> HookAnswer | None:
        """`PreToolUse`: what the hooks decided about a call; a rewrite that does not fit the tool is dropped."""
        answers = await self.hook("PreToolUse", {"tool_name": name, "tool_input": arguments, "tool_use_id": call_id},
                                   emit, tool_name=name, call_id=call_id)
        verdict = pre_tool_verdict(answers)
        if verdict is not None and verdict.tool_input is not None and name not in self.toolbox:
            return replace(verdict, tool_input=None)  # a decision of the host's (`apply_changes`): nothing to rewrite
        if verdict is not None and verdict.tool_input is not None:
            rewritten = self.toolbox.with_defaults(name, verdict.tool_input)
            if problem := self.toolbox.check(name, rewritten):
                emit(HookFailed(agent_id=self.agent_id, hook_event_name="PreToolUse", hook=verdict.hook,
                               message=f"its tool_input does not fit {name!r}: {problem}", tool_call_id=call_id))
                return replace(verdict, tool_input=None)
            return replace(verdict, tool_input=rewritten)
        return verdict

