"""One ACP session: a main `Agent` (its kernel, MCP connections and subagents), its turns, its questions.

Each `session/prompt` is one turn of `Agent.stream()`; its events go to the client as session updates
(`updates.py`). An approval a person must give becomes a `session/request_permission` request sent in a
task of its own, so several subagents may ask at once and the client may answer in any order; the turn
reads on meanwhile. `session/cancel` cancels the turn as Ctrl-C does in the terminal; questions still
open are rejected (the client answers them `cancelled`). Between turns, background subagents' events
(and their questions) come through `Agent.background_events()` the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Literal

from acp import update_agent_message_text, update_user_message_text
from acp.helpers import update_current_mode
from acp.schema import PromptResponse, SessionMode, SessionModeState, Usage

from freeact_sub import (
    Agent,
    ApprovalRequest,
    FreeactError,
    Response,
    RunCancelled,
    SubagentFinished,
    SubagentStarted,
    Thoughts,
    ToolOutput,
)
from freeact_sub.launch.modes import MODES, initial_mode

from .child_sessions import ChildSessions, RawSend
from .permissions import answer, options_for
from .updates import EventUpdates

__all__ = ["AcpSession"]

log = logging.getLogger("freeact_sub.acp")


class AcpSession:
    """A started main agent and the client connection its updates and questions go to."""

    def __init__(self, session_id: str, agent: Agent, client: Any, *, raw: RawSend | None = None) -> None:
        self.session_id = session_id
        self.agent = agent
        self.client = client
        self.raw = raw
        """Given when the client shows subagents as child sessions: sends the updates the SDK has no types for."""
        self.view = EventUpdates(agent.agent_id, child_sessions=raw is not None)
        self.children = ChildSessions(session_id, agent.agent_id) if raw is not None else None
        """Where each agent's updates go, when the client shows subagents as child sessions (`child_sessions.py`)."""
        self.asking: dict[int, tuple[ApprovalRequest, asyncio.Task[None]]] = {}
        """Questions the client has not answered yet, by `id()` of their request (a request is not hashable)."""
        self.turn: asyncio.Task[Any] | None = None
        self.mode = initial_mode(agent)
        """`session/set_mode`: how calls are approved and the type a prompt runs as (`launch/modes.py`)."""
        self._watcher: asyncio.Task[None] | None = None

    def watch_background(self) -> None:
        """Background subagents' events between turns reach the client too (their questions above all)."""
        self._watcher = asyncio.create_task(self._background(), name=f"acp-background-{self.session_id}")

    async def _background(self) -> None:
        async for event in self.agent.background_events():
            await self.handle(event)

    async def send(self, update: Any, agent_id: str | None = None) -> None:
        """Send one update: on this session, or, with child sessions, on the session of the agent it is about."""
        if self.children is None:
            await self.client.session_update(session_id=self.session_id, update=update)
            return
        target = self.children.target(update, agent_id or self.agent.agent_id)
        call = self.view.calls.get(getattr(update, "tool_call_id", None) or "")
        linked = self.children.with_link(update, call.content()) if call is not None else None
        if linked is not None:
            await self._raw(target, linked)
        else:
            await self.client.session_update(session_id=target, update=update)

    async def _raw(self, session_id: str, update: dict[str, Any]) -> None:
        assert self.raw is not None
        await self.raw(session_id, update)

    async def _announce(self, event: Any) -> None:
        """With child sessions: a child is announced before anything bears its id, and said to be idle once it ends."""
        if self.children is None:
            return
        if isinstance(event, SubagentStarted):
            task: str | None = self.view.acp_id(event.agent_id, event.tool_call_id)
            task = task if task in self.view.calls else None
            await self._raw(*self.children.announce(event, task))
        elif isinstance(event, SubagentFinished) and (ended := self.children.finished(event)) is not None:
            await self._raw(*ended)

    async def _child_state(self, agent_id: str, state: Any) -> None:
        if self.children is not None and (change := self.children.state(agent_id, state)) is not None:
            with contextlib.suppress(ConnectionError):
                await self._raw(*change)

    async def handle(self, event: Any) -> None:
        """Send the updates of one event; ask the client about an undecided approval, in a task of its own."""
        if isinstance(event, SubagentStarted):
            await self._announce(event)
        for update in self.view.updates(event):
            await self.send(update, event.agent_id)
        if isinstance(event, SubagentFinished):
            await self._announce(event)
            await self._drop_questions(of=event.subagent_id)  # the child ended (or was stopped): none of its questions
            if self.children is not None:  # stays open, none of its calls stays running on its session
                for update in self.view.interrupted(only=event.subagent_id):
                    await self.send(update)
        if isinstance(event, ApprovalRequest) and not event.decided:
            task = asyncio.create_task(self._ask(event), name=f"acp-ask-{event.tool_call_id}")
            self.asking[id(event)] = (event, task)

    async def _ask(self, request: ApprovalRequest) -> None:
        acp_id = self.view.acp_id(request.agent_id, request.tool_call_id)
        view = self.view.calls[acp_id]
        from acp.schema import ToolCallUpdate

        who = self.view.label(request.agent_id) or f"{request.agent_id} (main agent)"
        await self._child_state(request.agent_id, "requires_action")
        try:
            response = await self.client.request_permission(
                session_id=self.children.session(request.agent_id) if self.children else self.session_id,
                tool_call=ToolCallUpdate(tool_call_id=acp_id, title=view.title, kind=view.kind, status="pending",
                                         content=view.content(), raw_input=view.raw_input),
                options=options_for(request, who),
            )
        except asyncio.CancelledError:
            request.reject()
            raise
        except Exception as exc:  # the client failed to answer: nothing runs unapproved
            log.warning("permission request for %s failed: %s", acp_id, exc)
            request.reject()
        else:
            pending = [r for r, _ in self.asking.values() if r is not request]
            answer(request, response, self.agent.approvals, pending)
        finally:
            self.asking.pop(id(request), None)
        if not any(r.agent_id == request.agent_id for r, _ in self.asking.values()):
            await self._child_state(request.agent_id, "running")
        with contextlib.suppress(ConnectionError):  # the client went away: the agent is being stopped
            for decided in [request, *[r for r, _ in list(self.asking.values()) if r.decided]]:
                update = self.view.decided(decided)
                if update is not None:
                    await self.send(update, decided.agent_id)

    async def prompt(self, text: str) -> PromptResponse:
        """Run one turn to its end; the stop reason says how it ended (`end_turn`, `cancelled`, `refusal`,
        `max_turn_requests`)."""
        agent = self.agent
        before = agent.usage.total
        self.view.new_turn()
        cancelled = False
        try:
            prompt, agent_type, model = agent.read_prompt(text)
            agent_type = self.mode.turn_type(agent_type)
            async for event in agent.stream(prompt, agent_type=agent_type, model=model):
                await self.handle(event)
                if isinstance(event, RunCancelled) and event.agent_id == agent.agent_id:
                    cancelled = True
                elif isinstance(event, ToolOutput) and event.agent_id == agent.agent_id and agent_type is not None:
                    await self.send(update_agent_message_text(event.content))  # `@type …`: the answer is the child's
        except (FreeactError, ValueError) as exc:  # a failed model request, a bad command file, an unknown type
            await self.send(update_agent_message_text(f"\n\nThe turn failed: {exc}"))
        finally:
            await self._drop_questions()
        if cancelled:  # no call of the turn stays `in_progress` for ever (background subagents' calls go on)
            spare = {info.agent_id for info in agent.subagents() if info.background}
            for update in self.view.interrupted(spare):
                await self.send(update)
        used = agent.usage.total
        usage = Usage(input_tokens=used.input_tokens - before.input_tokens,
                      output_tokens=used.output_tokens - before.output_tokens,
                      total_tokens=used.total_tokens - before.total_tokens)
        if cancelled:
            stop = "cancelled"
        elif agent.turns.last_turn_rejected:
            stop = "refusal"
        elif agent.turns.turn_limit_reached:
            stop = "max_turn_requests"
        else:
            stop = "end_turn"
        meta = {"freeact-sub": {"cost_usd": str(used.cost) if used.cost is not None else None,
                                "subagents": [info.agent_id for info in agent.subagents()]}}
        return PromptResponse(stop_reason=stop, usage=usage, field_meta=meta)  # type: ignore[arg-type]

    def modes(self) -> SessionModeState:
        """The modes this session offers, and the one it is in."""
        return SessionModeState(current_mode_id=self.mode.id, available_modes=[
            SessionMode(id=mode.id, name=mode.name, description=mode.description) for mode in MODES.values()])

    async def set_mode(self, mode_id: str) -> None:
        """`session/set_mode`: from the next call on (a question already asked stays asked)."""
        self.mode = MODES[mode_id]
        self.mode.apply(self.agent)
        await self.send(update_current_mode(mode_id))

    def cancel(self) -> None:
        """`session/cancel`: stop the turn as Ctrl-C does (model stream, approval waits, cells, subagents)."""
        self.agent.cancel()

    def cancel_child(self, session_id: str) -> bool:
        """`session/cancel` on one of this session's child sessions: stop that subagent only (its parent's `task`
        result says the user stopped it; its siblings go on). False if it is no child session of this one."""
        child = self.children.agent_of.get(session_id) if self.children is not None else None
        return child is not None and (self.agent.cancel_subagent(child) or True)

    async def _drop_questions(self, every: bool = False, of: str | None = None) -> None:
        """Stop asking what is decided already (a cancel rejected it), and whatever the agent `of` asks (it ended);
        a background subagent's open question stays with the client unless `every` (the session closes)."""
        tasks = [task for request, task in self.asking.values()
                 if every or request.decided or request.agent_id == of]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def replay(self, events: list[Any]) -> None:
        """`session/load`: the saved conversation, as the client would have seen it live."""
        from freeact_sub.sessions import UserPrompt

        main = self.agent.agent_id
        for event in events:
            if event.agent_id == main and isinstance(event, UserPrompt):
                self.view.new_message()
                await self.send(update_user_message_text(event.content))
            elif event.agent_id == main and isinstance(event, Response | Thoughts):
                kind: Literal["message", "thought"] = "message" if isinstance(event, Response) else "thought"
                await self.send(self.view.words(kind, event.content))
                self.view.response_ended(kind)
            else:
                if isinstance(event, SubagentStarted):
                    await self._announce(event)
                for update in self.view.updates(event):
                    await self.send(update, event.agent_id)
                if isinstance(event, SubagentFinished):
                    await self._announce(event)

    async def close(self) -> None:
        """Stop the agent: its turn, subagents, kernels and MCP servers."""
        if self._watcher is not None:
            self._watcher.cancel()
        await self._drop_questions(every=True)
        await self.agent.stop()
        if self._watcher is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher
