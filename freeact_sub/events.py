"""Events emitted by `Agent.stream()`.

Every event derives from `AgentEvent` and carries the `agent_id` of the agent that produced it.
Events of a subagent flow through its parent's stream unchanged, still tagged with the
subagent's id, so one `async for` loop sees every agent at work.

Event family::

    AgentEvent
    ├── TurnStarted                  a model round begins (turn number, for "turns used")
    ├── ThoughtsChunk / Thoughts     the model's thinking, streamed / complete
    ├── ResponseChunk / Response     the model's text, streamed / complete
    ├── ModelUsage                   tokens (and cost, where known) of one model response
    ├── ModelRetry                   a model request failed before it acted and is sent again after a wait
    ├── ModelSlot                    a model request waits for a slot of `max_model_requests` / got one
    ├── ApprovalRequest              a tool call waits for a decision (or was decided by a policy);
    │                                `source="code"` for an MCP tool that a cell's code calls
    ├── CodeExecutionOutputChunk     output of a running cell, as it arrives
    ├── CodeExecutionOutput          the complete output of a cell (text and saved images)
    ├── ToolOutput                   the result of an MCP tool, of `reset_kernel` or of `task`
    ├── SubagentStarted              a `task` call started a child agent
    ├── SubagentFinished             that child agent ended (done, failed, cancelled, turn limit)
    ├── SubagentMessage              a message to a running background child (its parent's model or the person)
    ├── SubagentReport               a running child tells its parent something before it finishes
    └── TurnCancelled                the turn was cancelled; the history says how far it got

All events are frozen dataclasses; dispatch on them with `match`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from .usage import Usage

__all__ = [
    "AgentEvent",
    "ApprovalRequest",
    "CallSource",
    "CodeExecutionOutput",
    "CodeExecutionOutputChunk",
    "HookError",
    "ModelRetry",
    "ModelSlot",
    "ModelUsage",
    "Response",
    "ResponseChunk",
    "SubagentFinished",
    "SubagentMessage",
    "SubagentQueued",
    "SubagentReport",
    "SubagentStarted",
    "SubagentStatus",
    "Thoughts",
    "ThoughtsChunk",
    "ToolOutput",
    "TurnCancelled",
    "TurnStarted",
]


@dataclass(frozen=True, kw_only=True)
class AgentEvent:
    """Base of every event."""

    agent_id: str
    """Id of the agent that produced the event (`agent-` plus hex)."""
    at: float = field(default_factory=time.time, compare=False, repr=False)
    """When the event happened: seconds since the epoch (`time.time()`). A replayed event has the time saved."""


@dataclass(frozen=True, kw_only=True)
class TurnStarted(AgentEvent):
    """A model round begins: one model response plus the tool calls it makes is one turn."""

    turn: int
    """1 for the first round of this `stream()` call, 2 for the next, and so on."""


@dataclass(frozen=True, kw_only=True)
class ResponseChunk(AgentEvent):
    """A piece of the model's text, as it streams."""

    content: str


@dataclass(frozen=True, kw_only=True)
class Response(AgentEvent):
    """The model's complete text of one model response (or the final answer of a turn)."""

    content: str
    final: bool = False
    """True for the answer that ends the turn (no further tool calls follow)."""


@dataclass(frozen=True, kw_only=True)
class ModelUsage(AgentEvent):
    """The token usage of one model response of `agent_id`, emitted as soon as the response is complete.

    Totals per agent and for the tree: `Agent.usage`.
    """

    model_name: str
    """The model that answered, as the provider named it."""
    input_tokens: int
    """Input (prompt) tokens of the request, cache reads and writes included."""
    output_tokens: int
    """Output tokens of the response, thinking included."""
    cost: Decimal | None = None
    """USD from the `genai-prices` table; None when the model or provider is not in it."""


@dataclass(frozen=True, kw_only=True)
class ModelRetry(AgentEvent):
    """A model request of `agent_id` failed before any of its tool calls ran, and is sent again after `wait` seconds.

    Whatever its stream had shown is thrown away (`discarded`): drop the partial text and thinking of
    this agent's round and show the new attempt's instead. The retried response is the only one that
    reaches the history and the saved session. A request that runs out of retries fails as before.
    """

    attempt: int
    """The attempt about to be made: 2 for the first retry."""
    attempts: int
    """The most attempts this request gets (`model_retries` + 1)."""
    wait: float
    """Seconds until it is sent again: the provider's `Retry-After` (plus jitter), else exponential backoff."""
    reason: str
    """Why, in a few words: `rate limited`, `overloaded`, `server error 500`, `stream dropped`, `silent for 300 s`,
    `malformed stream`, …"""
    message: str = ""
    """The provider's own message (or the transport's), as it said it."""
    discarded: bool = False
    """Whether part of the failed response had been streamed (`ResponseChunk`, `ThoughtsChunk`) and is thrown away."""


@dataclass(frozen=True, kw_only=True)
class ModelSlot(AgentEvent):
    """A model request of `agent_id` waits for a slot: the tree has `limit` requests in flight (`max_model_requests`).

    Emitted with `waiting=True` when the wait begins and with `waiting=False` when the request got its
    slot (only for a request that had to wait).
    """

    waiting: bool
    limit: int
    waited: float = 0.0
    """Seconds it waited (with `waiting=False`)."""


@dataclass(frozen=True, kw_only=True)
class ThoughtsChunk(AgentEvent):
    """A piece of the model's thinking, as it streams."""

    content: str


@dataclass(frozen=True, kw_only=True)
class Thoughts(AgentEvent):
    """The model's complete thinking of one model response."""

    content: str


CallSource = Literal["model", "code"]


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


@dataclass(frozen=True, kw_only=True)
class CodeExecutionOutputChunk(AgentEvent):
    """Output of a running cell, as it arrives (stdout, stderr, results, tracebacks)."""

    text: str
    tool_call_id: str


@dataclass(frozen=True, kw_only=True)
class CodeExecutionOutput(AgentEvent):
    """The complete output of one cell."""

    text: str
    """All text output, ANSI escapes removed; also what the model receives (possibly shortened)."""
    images: tuple[Path, ...] = ()
    """Files the cell's images (`image/png`) were saved to."""
    tool_call_id: str
    status: Literal["ok", "error", "timeout", "kernel_died"] = "ok"
    """How the cell ended: normally, with an exception, interrupted after the timeout, or the kernel died."""
    kernel_wait: float = 0.0
    """Seconds the cell waited for its kernel before it ran: a subagent's kernel boots beside its first model
    request, and a first cell that comes sooner waits for it (0 otherwise)."""


@dataclass(frozen=True, kw_only=True)
class ToolOutput(AgentEvent):
    """The result of a non-code tool call: an MCP tool, `reset_kernel`, or a subagent's final answer (`task`)."""

    content: str
    tool_name: str
    tool_call_id: str
    is_error: bool = False
    """True for a refused call (bad arguments, unknown tool), an MCP tool that reported an error, and a
    `task` whose child failed, stopped at its turn limit or had a call rejected."""
    source: CallSource = "model"
    """`"code"` for the result of an MCP tool called from a cell's code (it went back to the cell, not the model)."""
    cell_call_id: str | None = None
    """For a call from code: the `tool_call_id` of the cell that made it."""


SubagentStatus = Literal["done", "failed", "cancelled", "turn_limit", "rejected"]


@dataclass(frozen=True, kw_only=True)
class SubagentStarted(AgentEvent):
    """A `task` call started a child agent. `agent_id` is the parent's id."""

    subagent_id: str
    """The child's agent id: every event the child produces carries it."""
    tool_call_id: str
    """The parent's `task` call that started the child; the child's result is a `ToolOutput` with this id."""
    prompt: str
    max_turns: int
    subagent_type: str = "general"
    """The agent type the child runs as."""
    description: str = ""
    """The `task` call's short title for the job (3-5 words); empty if the model gave none."""
    model: str = ""
    """The name of the model the child talks to, as sent to its provider."""
    sandbox: str = ""
    """The sandbox profile the child's kernel runs under (`workspace`, `read-only`, `off`, …); empty for a type that
    runs no code (it has no kernel)."""
    sandbox_limits: str = ""
    """What that profile lets the kernel reach and take: `hosts: pypi.org; memory 4 GiB, 256 processes, 60 s a
    cell` (empty with `sandbox`, or under `off`)."""


@dataclass(frozen=True, kw_only=True)
class SubagentQueued(AgentEvent):
    """A `task` call's child waits for a slot: `max_subagents` children run already. `agent_id` is the parent's id.

    `SubagentStarted` follows once a slot is free (or `SubagentFinished` with status `cancelled`
    if it is stopped while it waits).
    """

    subagent_id: str
    tool_call_id: str
    prompt: str
    subagent_type: str = "general"
    description: str = ""


@dataclass(frozen=True, kw_only=True)
class SubagentFinished(AgentEvent):
    """A child agent ended; its kernel is shut down and its MCP connections closed. `agent_id` is the parent's id."""

    subagent_id: str
    tool_call_id: str
    status: SubagentStatus
    turns_used: int
    elapsed: float
    """Seconds it ran: from its start (a slot taken) to its end."""
    usage: Usage = field(default_factory=Usage)
    """The child's tokens and cost over its life."""
    waited: float = 0.0
    """Seconds it waited for a slot before it started (0 when one was free)."""


@dataclass(frozen=True, kw_only=True)
class SubagentMessage(AgentEvent):
    """A message sent to a running background child: by its parent's model (`task_send`) or by the person
    (`Agent.send`, `/send` in the terminal, the message box of its notebook panel). `agent_id` is the parent's id.

    The child reads it at its next model request (it is queued while a round runs).
    """

    subagent_id: str
    text: str
    sender: Literal["parent", "user"]
    """`parent`: its parent's model sent it; `user`: the person did."""


@dataclass(frozen=True, kw_only=True)
class SubagentReport(AgentEvent):
    """A running child told its parent something before it finished (`task_report`). `agent_id` is the child's id.

    The parent's model reads it at its next model request, as it reads the end of a background child.
    """

    parent_id: str
    text: str


@dataclass(frozen=True, kw_only=True)
class TurnCancelled(AgentEvent):
    """The turn was cancelled (`Agent.cancel()`, a closed stream, a new `stream()`).

    The history keeps what completed; unfinished calls are answered as interrupted by the user,
    and a note says the turn was interrupted.
    """

    reason: str = "cancelled"


@dataclass(frozen=True, kw_only=True)
class HookError(AgentEvent):
    """A hook failed (raised, exited non-zero, answered no JSON object, or timed out); nothing it said counts.

    The moment went on as if the hook did not exist: a tool call it was asked about goes to the
    rules and the person as usual. `agent_id` is the agent whose moment it was.
    """

    hook_event_name: str
    """`PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `SubagentStart`, `SubagentStop` or `Stop`."""
    hook: str
    """The hook's label: its command, or the callable's name."""
    message: str
    """What went wrong."""
    tool_call_id: str | None = None
    """For the tool moments: the call it was asked about."""
