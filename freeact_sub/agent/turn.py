"""The turn engine: one `stream()` turn of an agent, from the prompt to its final answer.

`TurnEngine` is a part of `Agent`: it puts the prompt and its notes into the conversation, runs
model rounds (`model_round`; `compaction.py` makes room first) and the batches of tool calls
they ask for (run together, cancelled together, saved as they finish), tells the model of
background children and messages, ends an interrupted turn with a note, and asks the
`UserPromptSubmit` / `Stop` hooks. It keeps the
counts of the turn (rounds, limit, rejection, budget); what it works on belongs to its owner,
named by `TurnOwner`. `Reader` is the consumer's side of one stream.

Rules for faults and cancellation:
- what the model can correct (unknown tool, bad arguments, a failing cell or MCP call, a failed
  subagent) becomes a tool result, and the turn goes on;
- a model request that fails raises `ModelError` out of `stream()`, and the conversation
  history is as it was before the turn;
- a cancelled turn (`cancel()`, `stop()`, a consumer that closes the stream, a new `stream()`)
  keeps what completed: the history holds the finished calls' results, each unfinished call is
  answered with a result saying the user interrupted it, and a note says the turn was
  interrupted, so the model's memory matches what its kernel did;
- a turn only starts a model round or a round of tool calls while its consumer is reading: a
  consumer that stops iterating (`break` without closing the stream) leaves the turn waiting,
  not acting, and the next `stream()` ends it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..events import AgentEvent, Response, RunCancelled, TurnStarted
from .compaction import round_with_room
from .traced import traced_call, traced_emit, traced_run, traced_turn
from .turn_owner import TurnOwner

if TYPE_CHECKING:
    from pydantic_ai.messages import ToolCallPart, ToolReturnPart
    from pydantic_ai.models import Model

    from ..events import Emit
    from ..tree.registry import BackgroundEvents

__all__ = ["Reader", "TurnEnded", "TurnEngine", "wait_for_end"]


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


class TurnEngine:
    """Runs the turns of one agent and counts what they used."""

    def __init__(self, owner: TurnOwner) -> None:
        self._owner = owner
        self.turns_used = 0
        """Model rounds of the current (or last) turn."""
        self.turn_limit_reached = False
        """Whether the last turn stopped at `max_turns` (or at a budget)."""
        self.last_turn_rejected = False
        """Whether the last turn ended because the consumer rejected a call."""
        self.budget_reached: str | None = None
        """Which budget stopped the last turn."""
        self.tool_calls_used = 0
        """Tool calls made over the agent's life."""
        self.first_note: str | None = None
        """A subagent's note that goes with its first prompt (resumed or forked: its kernel is new)."""
        self.upstream: Callable[[], Awaitable[None]] | None = None
        """For a subagent: waits until the consumer of its parent's stream is reading."""
        self._prompt_notes: list[str] = []
        self._told: list[str] = []
        """Notes on background children told to the model in the current turn."""
        self._task: asyncio.Task[None] | None = None
        self._reader: Reader | None = None

    async def stream(
        self, prompt: str, limit: int | None, *, agent_type: str | None, model: str | None,
        turn_model: Model | None, background: BackgroundEvents | None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run one turn in a task of its own and yield its events, and `background`'s while it runs."""
        await self.end()
        reader = Reader()
        emit = traced_emit(self._owner, reader.emit)
        body = self.run(prompt, limit, emit, agent_type=agent_type, model=model, turn_model=turn_model)
        body = traced_run(self._owner, self, body, prompt)
        turn = asyncio.create_task(body, name=f"turn:{self._owner.agent_id}")
        if background is not None:
            background.attach(reader.emit)  # background subagents' events join this turn while it runs

        def turn_ended(_: object) -> None:
            if background is not None:
                background.detach()
            reader.queue.put_nowait(TurnEnded())

        turn.add_done_callback(turn_ended)
        self._task, self._reader = turn, reader
        try:
            while not isinstance(item := await reader.next(), TurnEnded):
                yield item
            if turn.cancelled():
                yield RunCancelled(agent_id=self._owner.agent_id)
            elif (error := turn.exception()) is not None:
                raise error
        finally:
            # A consumer that stops iterating early (aclose, its own cancellation, or a `break`
            # once the generator is finalized) ends the turn.
            if not turn.done():
                turn.cancel()
                await wait_for_end(turn)
            if self._task is turn:
                self._task, self._reader = None, None

    @property
    def running(self) -> bool:
        """Whether a turn is under way (its task started and not yet cleaned up)."""
        return self._task is not None

    def cancel(self) -> None:
        """Stop the current turn promptly: the model stream, approval waits, running cells, subagents."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def end(self) -> None:
        """End a turn that is still unfinished (its consumer left with `break`, the agent stops, or a new turn
        replaces it), and wait until it has."""
        previous = self._task
        if previous is not None and not previous.done():
            previous.cancel()
            await wait_for_end(previous)

    async def wait_for_reader(self) -> None:
        """Wait until whoever reads this turn's events (and, for a subagent, its parent's) has read them all."""
        reader = self._reader
        if reader is not None:
            await reader.caught_up()
        if self.upstream is not None:
            await self.upstream()

    async def run(
        self, prompt: str, limit: int | None, emit: Emit, *, agent_type: str | None = None,
        model: str | None = None, turn_model: Model | None = None,
    ) -> None:
        """Run a turn. A failed one leaves the history as before it; a cancelled one keeps what completed.

        With `agent_type` it is the person's directed `task` call (`model` for that subagent);
        `turn_model` is the model of this turn's rounds instead of the agent's own.
        """
        from .direct import direct_turn

        owner, conversation = self._owner, self._owner.conversation
        before, compactions = list(conversation.messages), conversation.compactions
        self._told = []
        if not owner.is_subagent:
            conversation.prompt(prompt)
        hooks = owner.hooks
        if not owner.is_subagent and hooks.wants("UserPromptSubmit"):
            answers = await hooks.ask("UserPromptSubmit", owner.hook_context(), {"prompt": prompt}, emit)
            self._prompt_notes = [f"[hook {a.hook}] {a.note}" for a in answers if a.note]
        try:
            if agent_type is not None:
                self.turns_used, self.turn_limit_reached = 0, False
                self.last_turn_rejected = await direct_turn(owner, prompt, agent_type, model, emit)
            else:
                await self._run(prompt, limit, emit, turn_model)
            if hooks.wants("Stop"):
                await hooks.ask("Stop", owner.hook_context(), {"final_answer": conversation.final_answer()}, emit)
        except asyncio.CancelledError:
            messages = conversation.messages
            if len(messages) != len(before) or (before and messages[-1] is not before[-1]):
                # the prompt is in: keep it and what completed, and say where the turn stopped
                calls = [p for p in messages[-1].parts if p.part_kind == "tool-call"]
                conversation.note_interruption([owner.parts.calls.interrupted(call) for call in calls])
            raise
        except BaseException:
            # back to the history before the turn, or to what a compaction during the turn left
            compacted = conversation.compactions != compactions
            conversation.messages = list(conversation.after_compaction) if compacted else before
            if owner.parts.subagents is not None:
                owner.parts.subagents.put_back(self._told)  # the history that told them is gone: tell them again
            raise
        finally:
            conversation.save()

    def _new_prompt(self, prompt: str) -> list[Any]:
        """The parts of the prompt's request: the notes that go first, the prompt, the hooks' notes."""
        from pydantic_ai.messages import UserPromptPart

        user: list[Any] = [UserPromptPart(prompt), *(UserPromptPart(note) for note in self._prompt_notes)]
        self._prompt_notes = []
        if self._owner.conversation.resumed:
            from ..sessions import RESUME_NOTE

            user.insert(0, UserPromptPart(RESUME_NOTE))
            self._owner.conversation.resumed = False
        if self.first_note is not None:
            user.insert(0, UserPromptPart(self.first_note))
            self.first_note = None
        return user

    async def _run(self, prompt: str, limit: int | None, emit: Emit, turn_model: Model | None) -> None:
        from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart

        owner, conversation = self._owner, self._owner.conversation
        self.turns_used, self.turn_limit_reached, self.last_turn_rejected, self.budget_reached = 0, False, False, None
        before_prompt = list(conversation.messages)  # where rewinding to this run's first turn goes back to
        conversation.add_user_parts(self._new_prompt(prompt), owner.system_prompt)
        last_text = ""
        while True:
            stop = self._limit_note(limit)
            if stop is not None:
                self.turn_limit_reached = True
                emit(Response(agent_id=owner.agent_id, content=f"{last_text}\n\n{stop}".strip(), final=True))
                return
            if self.turns_used:
                await self.wait_for_reader()  # no new model round for a consumer that stopped reading
            self._tell_background_results()
            self.turns_used += 1
            with traced_turn(owner, self.turns_used):
                emit(TurnStarted(agent_id=owner.agent_id, turn=self.turns_used))
                history = before_prompt if self.turns_used == 1 else list(conversation.messages)
                owner.rewinds.before_turn(prompt.split("\n", 1)[0][:80], self.turns_used, history)  # beside the model
                calls_before = self.tool_calls_used

                def ran_nothing(before: int = calls_before) -> bool:
                    return self.tool_calls_used == before

                response = await round_with_room(owner, emit, turn_model or owner.model, ran_nothing=ran_nothing)
                conversation.messages.append(response)
                calls = [p for p in response.parts if p.part_kind == "tool-call"]
                conversation.save(durable=not calls)  # with calls, the round ends with their results
                text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
                last_text = text or last_text
                if text or not calls:
                    emit(Response(agent_id=owner.agent_id, content=text, final=not calls))
                if not calls:
                    return
                self.tool_calls_used += len(calls)
                await self.wait_for_reader()  # no tool call starts while nobody reads
                await owner.rewinds.ready()  # what the calls change comes after the turn's checkpoint
                outcomes = await self._run_calls(calls, emit)
                conversation.messages.append(ModelRequest(parts=[part for part, _ in outcomes]))
                conversation.save()
                rejected = [call.tool_name for call, (_, was_rejected) in zip(calls, outcomes, strict=True)
                            if was_rejected]
                if rejected:
                    names = ", ".join(f"`{name}`" for name in rejected)
                    message = f"The user rejected the call to {names}, so this turn ends here."
                    conversation.messages.append(ModelResponse(parts=[TextPart(message)]))
                    self.last_turn_rejected = True
                    emit(Response(agent_id=owner.agent_id, content=message, final=True))
                    return

    def _limit_note(self, limit: int | None) -> str | None:
        """The note a turn stops with, if it reached its round limit or a budget; None to go on."""
        if limit is not None and self.turns_used >= limit:
            return f"[Stopped: the limit of {limit} turn{'s' if limit != 1 else ''} was reached.]"
        if budget := self.used_up_budget():
            self.budget_reached = budget
            return f"[Stopped: {budget}.]"
        return None

    def used_up_budget(self) -> str | None:
        """Which budget this agent has used up, said the way its parent reads it; None while within them."""
        owner, budgets = self._owner, self._owner.budgets
        usage = owner.tree.usage
        if budgets.max_tokens is not None:
            used = usage.of(owner.agent_id).total_tokens
            if used >= budgets.max_tokens:
                return f"its budget of {budgets.max_tokens} tokens was used up ({used} tokens)"
        if budgets.max_tool_calls is not None and self.tool_calls_used >= budgets.max_tool_calls:
            return f"its budget of {budgets.max_tool_calls} tool calls was used up"
        if budgets.max_cost is not None:
            cost = usage.of(owner.agent_id).cost or 0
            if cost >= Decimal(str(budgets.max_cost)):
                return f"its budget of ${budgets.max_cost:g} was used up (${cost:.4f})"
        if (tree_budget := owner.tree.config.max_cost) is not None:
            cost = usage.snapshot().total.cost or 0
            if cost >= Decimal(str(tree_budget)):
                return f"the session's budget of ${tree_budget:g} was used up (${cost:.4f} for all agents)"
        return None

    def _tell_background_results(self) -> None:
        """Add to the request the model is about to get: the notes on background children that ended or
        reported, and the messages sent to this agent while it works (`task_send`, the person's)."""
        from pydantic_ai.messages import ModelRequest, UserPromptPart

        owner = self._owner
        messages = owner.conversation.messages
        if not isinstance(last := messages[-1], ModelRequest):
            return
        notes = owner.parts.subagents.take_notes() if owner.parts.subagents is not None else []
        self._told.extend(notes)
        notes += owner.inbox.take_notes()
        if notes:
            messages[-1] = ModelRequest(parts=[*last.parts, *(UserPromptPart(note) for note in notes)])

    async def _run_calls(self, calls: list[ToolCallPart], emit: Emit) -> list[tuple[ToolReturnPart, bool]]:
        """Run the calls of one response concurrently; if one fails or the turn is cancelled, cancel the rest.

        All of them are waited for: a bare `gather` returns as soon as one task is cancelled or
        fails, leaving the others (a subagent still shutting down its kernel, say) running past the
        end of the turn. On cancellation the results of the calls that completed, and an
        "interrupted" result for each of the others, go into the history before the turn ends.
        """
        from pydantic_ai.messages import ModelRequest

        conversation = self._owner.conversation
        runner = self._owner.parts.calls
        # with several calls, each result is saved before its event is out: a crash while the others
        # run must not call it interrupted
        on_result = conversation.call_finished if conversation.log is not None and len(calls) > 1 else None
        announced = runner.announce_subagents(calls)  # their kernels boot while the calls are approved
        tasks = [asyncio.ensure_future(traced_call(self._owner, call, runner.run(call, emit, on_result)))
                 for call in calls]
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
            conversation.messages.append(ModelRequest(parts=parts))
            raise
        finally:
            runner.withdraw_subagents(announced)


async def wait_for_end(turn: asyncio.Task[None]) -> None:
    """Wait for a turn that was told to end; its outcome is not ours to raise (our own cancellation still is)."""
    await asyncio.wait([turn])
    if not turn.cancelled():
        turn.exception()  # retrieved: a failure of a turn nobody reads is not "never retrieved"
