"""The events of `Agent.stream()` as the protocol's session updates.

- the main agent's text and thinking: message and thought chunks;
- every cell, MCP call and `task` call, of any agent: a tool call (kind, title, the code or arguments
  as content), updated as its output streams, completed or failed by its result;
- a subagent: its `task` call is titled with the child's id and type once it starts, gathers the
  child's answers and thoughts, and ends with the child's result as its output; the child's own
  cells and calls are tool calls of their own, titled with the same id and type;
- the live subagents of the turn: a plan, one entry each (queued: pending, running: in progress,
  ended: completed).

`EventUpdates` keeps no I/O: it returns the updates for each event; the session sends them.
"""

from __future__ import annotations

from typing import Any, Literal

from acp import plan_entry, start_tool_call, update_agent_message_text, update_agent_thought_text, update_plan
from acp import update_tool_call as tool_call_update

from freeact_sub import (
    ApprovalRequest,
    CodeExecutionOutput,
    CodeExecutionOutputChunk,
    Response,
    ResponseChunk,
    SubagentFinished,
    SubagentQueued,
    SubagentStarted,
    Thoughts,
    ThoughtsChunk,
    ToolOutput,
)

from .tool_calls import CallView, call_title, summary

__all__ = ["EventUpdates"]

Status = Literal["pending", "in_progress", "completed", "failed"]

_INTERRUPTED = "The user interrupted"
"""How the result of a call a cancelled turn cut short begins (the agent's words): live and on replay it is `failed`."""


class EventUpdates:
    """Turns one agent tree's events into session updates, remembering each call's content."""

    def __init__(self, main_id: str, *, child_sessions: bool = False) -> None:
        self.main_id = main_id
        self.child_sessions = child_sessions
        """The client shows subagents as child sessions (`child_sessions.py`): a child's words are messages of its
        own session, not notes in its `task` call."""
        self._spoke: set[tuple[str, bool]] = set()
        """The subagents that have said something on their own session (a later answer is a new paragraph)."""
        self.calls: dict[str, CallView] = {}
        self.who: dict[str, str] = {}
        """A subagent's id → `agent-3fa2 (reviewer)`, the name its calls are titled with."""
        self.task_of: dict[str, str] = {}
        """A subagent's id → the ACP id of the `task` call that started it."""
        self.plan: dict[str, tuple[str, str]] = {}
        """A subagent's id → (its plan entry's text, status), in the order they were queued or started."""
        self._texts = {"message": False, "thought": False}
        """Whether the main agent has said text (or thought) this turn: a later response's starts a new paragraph."""
        self._open_text = {"message": False, "thought": False}

    @staticmethod
    def acp_id(agent_id: str, tool_call_id: str) -> str:
        """Call ids are the model's and may repeat across agents: the client's id names the agent too."""
        return f"{agent_id}/{tool_call_id}"

    def label(self, agent_id: str) -> str | None:
        return None if agent_id == self.main_id else self.who.get(agent_id, agent_id)

    def titled(self, agent_id: str) -> str:
        """The name an agent's calls are titled with: `agent-3fa2 (reviewer)`, or `agent-1a2b (main)`."""
        return self.label(agent_id) or f"{agent_id} (main)"

    def new_turn(self) -> None:
        self.plan.clear()
        self.new_message()

    def new_message(self) -> None:
        """A person's prompt: the main agent's next words start afresh (no paragraph break before them)."""
        self._texts = {"message": False, "thought": False}
        self._open_text = {"message": False, "thought": False}

    def words(self, kind: Literal["message", "thought"], text: str) -> Any:
        """A chunk of the main agent's text or thinking; the first chunk of a later model response is set off by a
        blank line, so two responses never run together (`…done.The kernel…`) and a heading stays a heading."""
        if not self._open_text[kind] and self._texts[kind] and text.strip():
            text = "\n\n" + text.lstrip("\n")
        if text:
            self._open_text[kind] = True
        make = update_agent_message_text if kind == "message" else update_agent_thought_text
        return make(text)

    def response_ended(self, kind: Literal["message", "thought"]) -> None:
        """One model response's text (or thinking) is complete."""
        if self._open_text[kind]:
            self._texts[kind] = True
        self._open_text[kind] = False

    def updates(self, event: Any) -> list[Any]:
        """The updates one event makes (none for events the protocol has no place for)."""
        main = event.agent_id == self.main_id
        match event:
            case ResponseChunk() if main:
                return [self.words("message", event.content)]
            case ThoughtsChunk() if main:
                return [self.words("thought", event.content)]
            case Response() if main:
                self.response_ended("message")
                return []
            case Thoughts() if main:
                self.response_ended("thought")
                return []
            case Response() | Thoughts() if not main and event.content.strip():
                return self._child_words(event)
            case ApprovalRequest():
                return [self._started(event)]
            case CodeExecutionOutputChunk():
                return self._output(event.agent_id, event.tool_call_id, event.content, append=True)
            case CodeExecutionOutput():
                failed = event.status != "ok"
                return self._output(event.agent_id, event.tool_call_id, event.content, done=True, failed=failed)
            case ToolOutput():
                return self._output(event.agent_id, event.tool_call_id, event.content, done=True,
                                    failed=event.is_error)
            case SubagentQueued():
                self.plan[event.subagent_id] = (self._plan_text(event.subagent_id, event.agent_type,
                                                                event.description or event.prompt), "pending")
                return [self._plan()]
            case SubagentStarted():
                return self._child_started(event)
            case SubagentFinished():
                text, _ = self.plan.get(event.subagent_id, (event.subagent_id, ""))
                self.plan[event.subagent_id] = (f"{text} — {event.status}", "completed")
                return [self._plan()]
        return []

    def _started(self, request: ApprovalRequest) -> Any:
        acp_id = self.acp_id(request.agent_id, request.tool_call_id)
        title = call_title(request.tool_name, request.tool_args, self.titled(request.agent_id), request.source)
        view = CallView(acp_id, request.tool_name, dict(request.tool_args), title)
        self.calls[acp_id] = view
        status: Status = "pending" if not request.decided else ("in_progress" if request.decision else "failed")
        view.status = status
        return start_tool_call(acp_id, title, kind=view.kind, status=status, content=view.content(),
                               raw_input=view.raw_input)

    def decided(self, request: ApprovalRequest) -> Any:
        """The call's update once its request is decided: running, or failed when rejected (with the reason)."""
        view = self.calls.get(self.acp_id(request.agent_id, request.tool_call_id))
        if view is None:
            return None
        if view.ended:
            return None
        if request.decision:
            view.status = "in_progress"
            return tool_call_update(view.acp_id, status="in_progress")
        view.output = "Rejected" + (f": {request.reason}" if request.reason else "")
        view.status = "failed"
        return tool_call_update(view.acp_id, status="failed", content=view.content())

    def interrupted(self, spare: set[str] = frozenset(), only: str | None = None) -> list[Any]:  # type: ignore[assignment]
        """A cancelled turn: every call still pending or running ends `failed` (but those of the agents in `spare`,
        background subagents the cancel did not stop), as its saved result (`The user interrupted…`) replays later.
        With `only`, the calls of that agent alone (a subagent that ended)."""
        ended: list[Any] = []
        for view in self.calls.values():
            agent = view.acp_id.partition("/")[0]
            if not view.ended and agent not in spare and only in (None, agent):
                view.status = "failed"
                view.output = view.output + ("\n" if view.output else "") + "Interrupted: the turn was cancelled."
                ended.append(tool_call_update(view.acp_id, status="failed", content=view.content()))
        return ended

    def _output(self, agent_id: str, call_id: str, text: str, *, append: bool = False, done: bool = False,
                failed: bool = False) -> list[Any]:
        view = self.calls.get(self.acp_id(agent_id, call_id))
        if view is None:
            return []
        view.output = view.output + text if append else text
        failed = failed or (done and text.startswith(_INTERRUPTED))
        status: Status = ("failed" if failed else "completed") if done else "in_progress"
        view.status = status
        return [tool_call_update(view.acp_id, status=status, content=view.content(),
                                 raw_output=text if done else None)]

    def _child_started(self, event: SubagentStarted) -> list[Any]:
        child = event.subagent_id
        self.who[child] = f"{child} ({event.agent_type})"
        self.plan[child] = (self._plan_text(child, event.agent_type, event.description or event.prompt),
                            "in_progress")
        updates: list[Any] = [self._plan()]
        task = self.calls.get(self.acp_id(event.agent_id, event.tool_call_id))
        if task is not None:
            self.task_of[child] = task.acp_id
            parent = self.label(event.agent_id)
            job = summary(event.description or event.prompt, 60)
            who = (f"{parent} → " if parent else "") + f"{child} ({event.agent_type})"
            task.title = who + (f": {job}" if job else "")
            task.status = "in_progress"
            updates.append(tool_call_update(task.acp_id, title=task.title, status="in_progress"))
        return updates

    def _child_words(self, event: Response | Thoughts) -> list[Any]:
        if self.child_sessions:
            said = (event.agent_id, isinstance(event, Response))
            text = ("\n\n" if said in self._spoke else "") + event.content.strip()
            self._spoke.add(said)
            make = update_agent_message_text if said[1] else update_agent_thought_text
            return [make(text)]
        task = self.calls.get(self.task_of.get(event.agent_id, ""))
        if task is None:
            return []
        text = event.content.strip()
        task.notes.append(f"*{text}*" if isinstance(event, Thoughts) else text)
        return [tool_call_update(task.acp_id, content=task.content())]

    @staticmethod
    def _plan_text(child: str, kind: str, job: str) -> str:
        return f"{child} ({kind}): {summary(job)}"

    def _plan(self) -> Any:
        return update_plan(plan_entry(text, status=status) for text, status in self.plan.values())  # type: ignore[arg-type]
