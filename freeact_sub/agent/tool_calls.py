"""One agent's tool calls: check the arguments, ask for approval, run the call, report it.

Every outcome is a tool result the model can read: a call with bad arguments or to an unknown
tool is refused with a message saying what to correct; a rejected call says it did not run
(and quotes the user's reason, if one was given);
cells, MCP tools, `reset_kernel` and `task` report what they did. Each step is also emitted as
an event tagged with the agent's id.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..events import (
    AgentEvent,
    CodeExecutionOutput,
    CodeExecutionOutputChunk,
    Emit,
    ToolOutput,
)
from ..kernels.cell_images import with_images
from ..sandbox.watch import created_notice, watched_names
from ..tools import parse_arguments

if TYPE_CHECKING:
    from pydantic_ai.messages import ToolCallPart, ToolReturnPart

    from ..code_tools import CodeTools
    from ..config.agent_config import AgentConfig
    from ..kernels.backends import KernelBackend
    from ..mcp.servers import McpConnections
    from ..policy.gate import ApprovalGate
    from ..sandbox import SandboxProfile
    from ..subagents.runner import SubagentRunner
    from ..tools import Toolbox

__all__ = ["Emit", "ToolCallRunner", "rejection_with_reason", "rule_refusal", "sandbox_note"]



class ToolCallRunner:
    """Runs the tool calls of one agent with its kernel, MCP connections and subagents."""

    def __init__(
        self,
        *,
        agent_id: str,
        config: AgentConfig,
        toolbox: Toolbox,
        gate: ApprovalGate,
        kernel: KernelBackend | None,
        mcp: McpConnections,
        subagents: SubagentRunner | None,
        model_sees_images: bool = False,
        sandbox: SandboxProfile | None = None,
        report: Callable[[str, Emit], None] | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.report = report
        """A subagent's `task_report`: hands the text to its parent (and emits `SubagentReport`)."""
        self.model_sees_images = model_sees_images
        """Whether cells' images go back to the model as images (its profile accepts them)."""
        self.config = config
        self.toolbox = toolbox
        self.gate = gate
        """Decides whether each call runs (hooks, rules, standing decisions, the person)."""
        self.kernel = kernel
        self.mcp = mcp
        self.subagents = subagents
        self.sandbox = sandbox
        """The sandbox profile the kernel runs under (a refusal in a cell's output is explained with it)."""
        self.code_tools: CodeTools | None = None
        """Set when the kernel's code may call MCP tools; cells then run through it."""
        self._started: set[str] = set()
        """Ids of the calls that began to run (approved and past their checks)."""
        self._printed: dict[str, list[str]] = {}
        """What each running cell has printed so far, by call id (an interrupted cell's result keeps it)."""

    def announce_subagents(self, calls: list[ToolCallPart]) -> list[str]:
        """Before a response's calls are approved: its valid `task` calls, so the kernels of their children boot
        while a person decides (see `SubagentRunner.announce`); returns the ids announced, for
        `withdraw_subagents`. Calls approved without asking are not announced: announcing them would only put
        the kernels' boots ahead of their children's start, which asks for the kernels at once anyway."""
        if self.subagents is None or "task" not in self.toolbox or self.gate.approvals.is_approved(self.agent_id):
            return []  # approved at once (auto-approve, "always"): the children start now and take kernels on demand
        valid = []
        for call in calls:
            if call.tool_name != "task":
                continue
            try:
                arguments = parse_arguments(call.args)
            except ValueError:
                continue
            if self.toolbox.check("task", arguments) or self.subagents.check("task", arguments):
                continue
            valid.append((call.tool_call_id, arguments))
        return self.subagents.announce(valid) if valid else []

    def withdraw_subagents(self, call_ids: list[str]) -> None:
        """The calls `announce_subagents` named have run (or were rejected or cancelled)."""
        if self.subagents is not None:
            self.subagents.withdraw(call_ids)

    async def run(
        self, call: ToolCallPart, emit: Emit, on_result: Callable[[ToolReturnPart], None] | None = None
    ) -> tuple[ToolReturnPart, bool]:
        """Validate, ask for approval and run one call; returns its tool-return part and whether it was rejected.

        `on_result` gets the result before the event that reports it is emitted, so whoever sees
        that event (and ends the process, say) knows the result was handed on.
        """
        part, rejected, reported = await self._run(call, emit)
        if on_result is not None:
            on_result(part)
        if reported is not None:
            emit(reported)
        return part, rejected

    async def _run(self, call: ToolCallPart, emit: Emit) -> tuple[ToolReturnPart, bool, AgentEvent | None]:
        from pydantic_ai.messages import ToolReturnPart

        name, call_id = call.tool_name, call.tool_call_id
        times: dict[str, float] = {}
        """When the call was asked about, decided and started (saved with its result, for the timeline)."""

        def result(content: Any, rejected: bool = False) -> tuple[ToolReturnPart, bool, AgentEvent | None]:
            metadata = {"timeline": times} if times else None
            part = ToolReturnPart(tool_name=name, content=content, tool_call_id=call_id, metadata=metadata)
            return part, rejected, None

        def refuse(message: str) -> tuple[ToolReturnPart, bool, AgentEvent | None]:
            part, _, _ = result(message)
            return part, False, ToolOutput(agent_id=self.agent_id, content=message, tool_name=name,
                                           tool_call_id=call_id, is_error=True)

        try:
            arguments = parse_arguments(call.args)
        except ValueError as exc:
            return refuse(f"Invalid arguments for {name!r}: {exc}. Send the arguments as a JSON object.")
        if problem := self.toolbox.check(name, arguments):
            return refuse(problem)
        arguments = self.toolbox.with_defaults(name, arguments)
        if self.subagents is not None and (problem := self.subagents.check(name, arguments)):
            return refuse(problem)  # a call that cannot work is answered at once: nobody is asked
        request = await self.gate.ask(name, arguments, call_id, emit)
        times["asked"] = request.at
        if request.decided_at is not None:
            times["decided"] = request.decided_at
        if not await request.approved():
            if request.hook is not None and request.rule is None and request.reason is not None:
                return result(hook_refusal(name, request.hook, request.reason))
            if request.rule is not None:
                return result(rule_refusal(name, request.rule))
            if request.reason is None:
                return result("The user rejected this call; it did not run.", rejected=True)
            return result(rejection_with_reason(request.reason))
        arguments = request.tool_args  # as a hook may have rewritten them
        self._started.add(call_id)
        times["started"] = time.time()
        content, reported = await self._execute(name, arguments, call_id, emit)
        if isinstance(reported, CodeExecutionOutput) and reported.kernel_wait:
            times["kernel_wait"] = reported.kernel_wait  # seconds, not a moment: the timeline splits the cell by it
        if self.gate.hooks is not None and self.gate.hooks.wants("PostToolUse"):
            content = await self.gate.after(name, arguments, call_id, content, emit)
        part, _, _ = result(content)
        return part, False, reported

    def interrupted(self, call: ToolCallPart) -> ToolReturnPart:
        """The result of a call that the user's interruption (a cancelled turn) left unfinished."""
        from pydantic_ai.messages import ToolReturnPart

        if call.tool_call_id in self._started:
            text = (
                "The user interrupted this call while it was running. What it did before that stays "
                "done (variables, files, a subagent's work); its output is incomplete."
            )
            printed = "".join(self._printed.pop(call.tool_call_id, []))
            if printed.strip():
                text += "\nWhat it had printed by then:\n" + _shorten(printed, self.config.max_output_chars)
        else:
            text = "The user interrupted the turn before this call ran; it did not run."
        return ToolReturnPart(tool_name=call.tool_name, content=text, tool_call_id=call.tool_call_id)

    async def _execute(
        self, name: str, arguments: dict[str, Any], call_id: str, emit: Emit
    ) -> tuple[Any, AgentEvent]:
        """Run an approved call; returns its result and the event that reports it (emitted by `run`)."""
        if name == "execute_ipython_cell":
            return await self._execute_cell(arguments["code"], call_id, emit)
        is_error = False
        if name == "reset_kernel":
            assert self.kernel is not None  # only offered with a kernel
            await self.kernel.reset()
            text = "The kernel was restarted: all variables, imports and definitions are gone."
        elif name == "task_report":
            assert self.report is not None  # only offered to a subagent
            self.report(arguments["text"], emit)
            text = "Reported: your parent reads it at its next step. Go on with your job."
        elif name in ("task", "task_output", "task_stop", "task_list", "task_send"):
            assert self.subagents is not None
            text, is_error = await self.subagents.call(name, arguments, call_id, emit)
        else:
            text, is_error = await self.mcp.call(name, arguments, timeout=self.config.execution_timeout)
        return text, ToolOutput(agent_id=self.agent_id, content=text, tool_name=name, tool_call_id=call_id,
                                is_error=is_error)

    async def _execute_cell(self, code: str, call_id: str, emit: Emit) -> tuple[Any, AgentEvent]:
        printed = self._printed[call_id] = []
        record = self.gate.record
        if record is not None:
            outer = emit

            def saving(event: AgentEvent) -> None:
                if isinstance(event, ToolOutput) and event.source == "code":
                    try:
                        record({"kind": "code_result", "call": event.tool_call_id, "cell": event.cell_call_id,
                                "tool": event.tool_name, "content": event.content, "is_error": event.is_error})
                    except (OSError, ValueError, TypeError):
                        pass
                outer(event)

            emit = saving

        def on_output(text: str) -> None:
            printed.append(text)
            emit(CodeExecutionOutputChunk(agent_id=self.agent_id, content=text, tool_call_id=call_id))

        watching = self.sandbox is not None and self.sandbox.enforced and self.kernel is not None
        before = watched_names(self.config.working_dir) if watching else frozenset()
        if self.code_tools is not None:
            outcome = await self.code_tools.execute(
                code, call_id=call_id, emit=emit, timeout=self.config.execution_timeout, on_output=on_output
            )
        else:
            assert self.kernel is not None  # only offered with a kernel
            outcome = await self.kernel.execute(code, timeout=self.config.execution_timeout, on_output=on_output)
        self._printed.pop(call_id, None)  # it ended: its whole output is in its result
        if watching and (planted := created_notice(before, self.config.working_dir)) is not None:
            outcome.text += ("" if outcome.text.endswith("\n") or not outcome.text else "\n") + planted + "\n"
            on_output(planted + "\n")
        reported = CodeExecutionOutput(
            agent_id=self.agent_id,
            content=outcome.text,
            images=tuple(outcome.images),
            tool_call_id=call_id,
            status=outcome.status,
            kernel_wait=outcome.kernel_wait,
        )
        text = _shorten(outcome.text, self.config.max_output_chars) or "(the cell ran and printed nothing)"
        if (note := sandbox_note(outcome.text, self.sandbox)) is not None:
            text += "\n" + note
        if not outcome.images or not self.model_sees_images or self.config.max_images_to_model == 0:
            return text, reported
        images = with_images(
            text, outcome.images, max_images=self.config.max_images_to_model, max_bytes=self.config.max_image_bytes
        )
        return images, reported


_REFUSALS = ("Permission denied", "[Errno 13]", "[Errno 1] Operation not permitted", "Network is unreachable",
             "[Errno 101]", "Read-only file system", "Device or resource busy", "Invalid cross-device link")


def sandbox_note(output: str, profile: SandboxProfile | None) -> str | None:
    """The line added to a cell's result whose output shows a refusal, when a sandbox may have made it."""
    if profile is None or not profile.enforced or not any(refusal in output for refusal in _REFUSALS):
        return None
    return (
        f"[sandbox] This kernel runs under the sandbox profile {profile.describe()}; it cannot read secrets "
        "(such as ~/.ssh and .env files), write elsewhere, change what is kept read-only (.git, .env files, "
        "virtual environments, .freeact-sub, editor folders), or open Unix sockets"
        + (f", and it reaches only {', '.join(profile.hosts)} (HTTP and HTTPS through the sandbox's proxy)"
           if profile.hosts is not None else "" if profile.network else ", and it has no network")
        + ". If the error above is such a refusal, do not work around it: ask the user."
    )


def hook_refusal(name: str, hook: str, reason: str) -> str:
    """The tool result of a call a `PreToolUse` hook refused: nobody was asked, the turn goes on."""
    return (
        f"A hook ({hook}) refused this call to `{name}`, so it did not run. Its reason: \"{reason}\". "
        "Do the job another way or say that you cannot."
    )


def rule_refusal(name: str, rule: str) -> str:
    """The tool result of a call an approval rule refused: nobody was asked, the turn goes on."""
    return (
        f"An approval rule refused this call to `{name}` ({rule}), so it did not run and nobody was asked. "
        "Do not call it again; do the job without it or say that you cannot."
    )


def rejection_with_reason(reason: str) -> str:
    """The tool result of a call the user rejected with a reason: the turn goes on with it."""
    return f"The user rejected this call, so it did not run. The user's reason: \"{reason}\""


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head, tail = text[: limit // 2], text[-(limit // 2) :]
    skipped = len(text) - len(head) - len(tail)
    return f"{head}\n[... {skipped} characters of output left out ...]\n{tail}"
