"""The turn engine: one `stream()` turn of an agent, from the prompt to its final answer.

`TurnEngine` is the part of `Agent` that runs turns: the prompt and its notes into the history,
model rounds (streamed, with usage and budgets), batches of tool calls (run together, cancelled
together, saved as they finish), the notes on background children, an interrupted turn's note,
and the `UserPromptSubmit` / `Stop` hooks. `Agent` owns the state it works on (history,
kernel, tools, session log) and its lifecycle; `Reader` is the consumer's side of one stream.
"""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..errors import ModelError
from ..events import AgentEvent, ModelRetry, ModelUsage, Response, Thoughts, TurnStarted
from ..models import retries
from ..models.request import Attempt, provider_message, send
from ..models.retries import LONGEST_WAIT, backoff, provider_wait, retry_reason
from .direct import DirectTurns

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart, ToolReturnPart
    from pydantic_ai.models import Model

    from ..config.agent_config import AgentConfig
    from ..policy.hooks import Hooks
    from ..sessions import AgentLog
    from ..subagents.runner import SubagentRunner
    from ..tools import Toolbox
    from ..tree.registry import AgentTree
    from .tool_calls import Emit, ToolCallRunner

__all__ = ["INTERRUPTED_NOTE", "Reader", "TurnEnded", "TurnEngine", "wait_for_end"]

INTERRUPTED_NOTE = "[The user interrupted this turn before it was finished.]"


class TurnEnded:
    """Marks the end of a turn's event queue."""


class Reader:
    """The consumer's side of one `stream()`: the event queue, and whether the consumer is waiting for more."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[AgentEvent | TurnEnded] = asyncio.Queue()
        self._waiting = asyncio.Event()

    def emit(self, event: AgentEvent) -> None:
        self._waiting.clear()
        self.queue.put_nowait(event)

    async def next(self) -> AgentEvent | TurnEnded:
        if self.queue.empty():
            self._waiting.set()  # the consumer has taken every event and asks for more
        return await self.queue.get()

    async def caught_up(self) -> None:
        """Wait until the consumer has taken every event so far and asks for the next one."""
        await self._waiting.wait()


class TurnEngine(DirectTurns):
    """Runs the turns of an `Agent` (its base class); the state it works on is the agent's."""

    if TYPE_CHECKING:  # the agent's state this engine reads and writes (set in `Agent.__init__`)
        agent_id: str
        tree: AgentTree
        turns_used: int
        tool_calls_used: int
        turn_limit_reached: bool
        last_turn_rejected: bool
        budget_reached: str | None
        max_tokens: int | None
        max_tool_calls: int | None
        max_cost: float | None
        _history: list[ModelMessage]
        _log: AgentLog | None
        _calls: ToolCallRunner | None
        _subagents: SubagentRunner | None
        _toolbox: Toolbox | None
        _model: Model | None
        _turn_model: Model | None
        _told: list[str]
        _inbox: list[tuple[str, str]]
        _prompt_notes: list[str]
        _first_note: str | None
        _resume_note: bool

        @property
        def is_subagent(self) -> bool: ...
        @property
        def settings(self) -> AgentConfig: ...
        @property
        def hooks(self) -> Hooks: ...
        @property
        def system_prompt(self) -> str: ...
        def hook_context(self) -> dict[str, Any]: ...
        async def wait_for_reader(self) -> None: ...

    async def _turn_keeping_history(
        self, prompt: str, limit: int | None, emit: Emit, *, subagent_type: str | None = None,
        model: str | None = None, turn_model: Model | None = None,
    ) -> None:
        """Run a turn. A failed one leaves the history as before it; a cancelled one keeps what completed.

        With `subagent_type` it is the person's directed `task` call (`model` for that subagent);
        `turn_model` is the model of this turn's rounds instead of the agent's own.
        """
        before = list(self._history)
        self._told = []
        if self._log is not None and not self.is_subagent:
            self._log.prompt(prompt)
        hooks = self.hooks
        if not self.is_subagent and hooks.wants("UserPromptSubmit"):
            answers = await hooks.ask("UserPromptSubmit", self.hook_context(), {"prompt": prompt}, emit)
            self._prompt_notes = [f"[hook {a.hook}] {a.note}" for a in answers if a.note]
        try:
            if subagent_type is not None:
                await self._direct_turn(prompt, subagent_type, model, emit)
            else:
                self._turn_model = turn_model
                await self._run_turn(prompt, limit, emit)
            if hooks.wants("Stop"):
                await hooks.ask("Stop", self.hook_context(), {"final_answer": self._final_answer()}, emit)
        except asyncio.CancelledError:
            started = len(self._history) != len(before) or (before and self._history[-1] is not before[-1])
            if started:  # the prompt is in: keep it and what completed, and say where the turn stopped
                self._note_interruption()
            raise
        except BaseException:
            self._history = before
            if self._subagents is not None:
                self._subagents.put_back(self._told)  # the history that told them is gone: tell them again
            raise
        finally:
            self._turn_model = None
            self._save()

    def _save(self, *, durable: bool = True) -> None:
        """Append what is new in the history to this agent's transcript: flushed, and fsync'ed if `durable`.

        Flushed lines survive a killed process; the fsync at the end of each round (a model
        response with no calls, or a batch of tool results) makes them survive the machine.
        """
        if self._log is not None:
            self._log.sync(self._history, durable=durable)

    def _note_interruption(self) -> None:
        """End the history of a cancelled turn: answer calls left without a result, then add a note."""
        from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, UserPromptPart

        last = self._history[-1]
        if isinstance(last, ModelResponse):
            calls = [part for part in last.parts if isinstance(part, ToolCallPart)]
            parts = [self._calls.interrupted(call) for call in calls] if self._calls is not None else []
            self._history.append(ModelRequest(parts=[*parts, UserPromptPart(INTERRUPTED_NOTE)]))
        else:
            self._history[-1] = ModelRequest(parts=[*last.parts, UserPromptPart(INTERRUPTED_NOTE)])

    async def _run_turn(self, prompt: str, limit: int | None, emit: Emit) -> None:
        from pydantic_ai.messages import (
            ModelRequest,
            ModelResponse,
            SystemPromptPart,
            TextPart,
            UserPromptPart,
        )

        self.turns_used = 0
        self.turn_limit_reached = False
        self.last_turn_rejected = False
        self.budget_reached = None
        user: list[Any] = [UserPromptPart(prompt), *(UserPromptPart(note) for note in self._prompt_notes)]
        self._prompt_notes = []
        if self._resume_note:
            from ..sessions import RESUME_NOTE

            user.insert(0, UserPromptPart(RESUME_NOTE))
            self._resume_note = False
        if self._first_note is not None:
            user.insert(0, UserPromptPart(self._first_note))
            self._first_note = None
        if not self._history:
            self._history.append(ModelRequest(parts=[SystemPromptPart(self.system_prompt), *user]))
        elif isinstance(last := self._history[-1], ModelRequest):
            # the previous turn stopped at its limit after tool results: the prompt joins that request
            self._history[-1] = ModelRequest(parts=[*last.parts, *user])
        else:
            self._history.append(ModelRequest(parts=user))

        last_text = ""
        while True:
            if limit is not None and self.turns_used >= limit:
                self.turn_limit_reached = True
                note = f"[Stopped: the limit of {limit} turn{'s' if limit != 1 else ''} was reached.]"
                emit(Response(agent_id=self.agent_id, content=f"{last_text}\n\n{note}".strip(), final=True))
                return
            if budget := self.used_up_budget():
                self.turn_limit_reached = True
                self.budget_reached = budget
                emit(Response(agent_id=self.agent_id, content=f"{last_text}\n\n[Stopped: {budget}.]".strip(),
                              final=True))
                return
            if self.turns_used:
                await self.wait_for_reader()  # no new model round for a consumer that stopped reading
            self._tell_background_results()
            self.turns_used += 1
            emit(TurnStarted(agent_id=self.agent_id, turn=self.turns_used))
            response = await self._model_round(emit)
            self._history.append(response)
            calls = [p for p in response.parts if p.part_kind == "tool-call"]
            self._save(durable=not calls)  # with calls, the round ends with their results
            text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
            last_text = text or last_text
            if text:
                emit(Response(agent_id=self.agent_id, content=text, final=not calls))
            if not calls:
                if not text:
                    emit(Response(agent_id=self.agent_id, content="", final=True))
                return
            assert self._calls is not None
            self.tool_calls_used += len(calls)
            await self.wait_for_reader()  # no tool call starts while nobody reads
            outcomes = await self._run_calls(calls, emit)
            self._history.append(ModelRequest(parts=[part for part, _ in outcomes]))
            self._save()
            rejected = [call.tool_name for call, (_, was_rejected) in zip(calls, outcomes, strict=True) if was_rejected]
            if rejected:
                names = ", ".join(f"`{name}`" for name in rejected)
                message = f"The user rejected the call to {names}, so this turn ends here."
                self._history.append(ModelResponse(parts=[TextPart(message)]))
                self.last_turn_rejected = True
                emit(Response(agent_id=self.agent_id, content=message, final=True))
                return

    def _final_answer(self) -> str:
        """The text of the last model response of the turn (what a final `Response` carried)."""
        for message in reversed(self._history):
            if message.kind == "response":
                return "".join(getattr(part, "content", "") for part in message.parts if part.part_kind == "text")
        return ""

    def used_up_budget(self) -> str | None:
        """Which budget this agent has used up, said the way its parent reads it; None while within them."""
        if self.max_tokens is not None:
            used = self.tree.usage.of(self.agent_id).total_tokens
            if used >= self.max_tokens:
                return f"its budget of {self.max_tokens} tokens was used up ({used} tokens)"
        if self.max_tool_calls is not None and self.tool_calls_used >= self.max_tool_calls:
            return f"its budget of {self.max_tool_calls} tool calls was used up"
        if self.max_cost is not None:
            cost = self.tree.usage.of(self.agent_id).cost or 0
            if cost >= Decimal(str(self.max_cost)):
                return f"its budget of ${self.max_cost:g} was used up (${cost:.4f})"
        if (tree_budget := self.tree.config.max_cost) is not None:
            cost = self.tree.usage.snapshot().total.cost or 0
            if cost >= Decimal(str(tree_budget)):
                return f"the session's budget of ${tree_budget:g} was used up (${cost:.4f} for all agents)"
        return None

    def _tell_background_results(self) -> None:
        """Add to the request the model is about to get: the notes on background children that ended or
        reported, and the messages sent to this agent while it works (`task_send`, the person's)."""
        from pydantic_ai.messages import ModelRequest, UserPromptPart

        if not isinstance(last := self._history[-1], ModelRequest):
            return
        notes = self._subagents.take_notes() if self._subagents is not None else []
        self._told.extend(notes)
        messages, self._inbox = self._inbox, []
        notes += [f"[A message from {sender}, sent while you work:]\n{text}" for sender, text in messages]
        if notes:
            self._history[-1] = ModelRequest(parts=[*last.parts, *(UserPromptPart(note) for note in notes)])

    async def _run_calls(self, calls: list[ToolCallPart], emit: Emit) -> list[tuple[ToolReturnPart, bool]]:
        """Run the calls of one response concurrently; if one fails or the turn is cancelled, cancel the rest.

        All of them are waited for: a bare `gather` returns as soon as one task is cancelled or
        fails, leaving the others (a subagent still shutting down its kernel, say) running past the
        end of the turn. On cancellation the results of the calls that completed, and an
        "interrupted" result for each of the others, go into the history before the turn ends.
        """
        from pydantic_ai.messages import ModelRequest

        assert self._calls is not None
        runner = self._calls
        on_result = None
        if self._log is not None and len(calls) > 1:
            log = self._log

            def on_result(part: ToolReturnPart) -> None:
                # saved before its event is out: a crash while the others run must not call it interrupted
                log.call_finished(ModelRequest(parts=[part]))

        announced = runner.announce_subagents(calls)  # their kernels boot while the calls are approved
        tasks = [asyncio.ensure_future(runner.run(call, emit, on_result)) for call in calls]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                if not task.cancelling():  # cancelled already (with the turn): a second cancel cuts its cleanup short
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            parts = [
                task.result()[0] if not task.cancelled() and task.exception() is None else runner.interrupted(call)
                for call, task in zip(calls, tasks, strict=True)
            ]
            self._history.append(ModelRequest(parts=parts))
            raise
        finally:
            runner.withdraw_subagents(announced)

    async def _model_round(self, emit: Emit) -> ModelResponse:
        """One model response, complete: sent again (after a wait) while it fails in a way worth retrying.

        The invariant retries rest on: nothing of a response acts before it is complete. Its tool
        calls run only after this returns it (`_run_turn`), so a request that fails here has run
        nothing, and its partial response, never in the history, is simply dropped (`ModelRetry`
        says so to the consumers that showed it). Only the response that completed is returned,
        saved and counted.
        """
        from pydantic_ai.messages import ThinkingPart

        calls_before = self.tool_calls_used
        settings = self.settings
        attempts = settings.model_retries + 1
        first_sent: float | None = None
        retried: list[dict[str, Any]] = []
        attempt = 1
        while True:
            this = Attempt()
            try:
                response = await self._model_request(emit, this)
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                assert self.tool_calls_used == calls_before, "a model request is retried only before its calls ran"
                first_sent = first_sent or this.sent
                reason = retry_reason(exc)
                asked = provider_wait(exc)
                if reason is None or attempt >= attempts or (asked is not None and asked > LONGEST_WAIT):
                    tried = f" (after {attempt} attempts)" if attempt > 1 else ""
                    waits = (f" (the provider asked to wait {asked:g} s, longer than {LONGEST_WAIT:g} s)"
                             if reason is not None and asked is not None and asked > LONGEST_WAIT else "")
                    raise ModelError(f"the model request failed{tried}: {type(exc).__name__}: {exc}{waits}") from exc
                wait = backoff(attempt, settings.model_retry_backoff, asked)
                attempt += 1
                self.tree.usage.retried(self.agent_id)
                said = provider_message(exc)
                retried.append({"at": time.time(), "attempt": attempt, "attempts": attempts, "wait": wait,
                                "reason": reason, "message": said[:500]})
                emit(ModelRetry(agent_id=self.agent_id, attempt=attempt, attempts=attempts, wait=wait, reason=reason,
                                message=said, discarded=this.shown))
                await retries.sleep(wait)
        # when the request went out and the response was complete, saved with it (for the timeline)
        timeline: dict[str, Any] = {"sent": first_sent or this.sent, "received": time.time()}
        if retried:
            timeline["retries"] = retried
        response.metadata = {**(response.metadata or {}), "timeline": timeline}
        used = self.tree.usage.record(self.agent_id, response)
        emit(
            ModelUsage(
                agent_id=self.agent_id,
                model_name=response.model_name or "",
                input_tokens=used.input_tokens,
                output_tokens=used.output_tokens,
                cost=used.cost,
            )
        )
        for part in response.parts:
            if isinstance(part, ThinkingPart) and part.content:
                emit(Thoughts(agent_id=self.agent_id, content=part.content))
        return response

    async def _model_request(self, emit: Emit, this: Attempt) -> ModelResponse:
        """One attempt: the request with the agent's history, model, tools and settings (`model_request.send`)."""
        assert self._model is not None and self._toolbox is not None
        return await send(
            self._turn_model or self._model, self._history, self._toolbox.definitions(), self.settings.model_settings,
            agent_id=self.agent_id, slots=self.tree.model_requests, idle=self.settings.stream_idle_timeout,
            emit=emit, attempt=this,
        )


async def wait_for_end(turn: asyncio.Task[None]) -> None:
    """Wait for a turn that was told to end; its outcome is not ours to raise (our own cancellation still is)."""
    await asyncio.wait([turn])
    if not turn.cancelled():
        turn.exception()  # retrieved: a failure of a turn nobody reads is not "never retrieved"
