"""An agent's conversation: its history (pydantic-ai messages) and its link to the saved session.

A main agent opens its session (new, or the one it resumes) at `start()` and closes it at `stop()`;
a subagent writes its own transcript inside its parent's session (`child_log`). What the model
saw is saved as the turn goes, flushed per message and fsync'ed at the end of each round.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ToolReturnPart

    from ..models.context import SizeCache
    from ..sessions import AgentLog, SessionStore
    from ..sessions.index import SavedAgent
    from ..tree.registry import ChildSpec

__all__ = ["INTERRUPTED_NOTE", "Conversation"]

INTERRUPTED_NOTE = "[The user interrupted this turn before it was finished.]"


class Conversation:
    """The history of one agent and where it is saved (nowhere, its own session, or its parent's)."""

    def __init__(self, messages: list[ModelMessage] | None = None) -> None:
        self.messages: list[ModelMessage] = list(messages or [])
        """The conversation so far; a resumed agent has its saved one from the start."""
        self.log: AgentLog | None = None
        """Where this agent's conversation is saved (None: not saved)."""
        self.resumed = False
        """Whether the next prompt tells the model that its kernel is new (a resumed conversation)."""
        self.measured_from = len(self.messages)
        """Responses before this index were measured against another history (a compacted or a resumed one)."""
        self.sizes: SizeCache = {}
        """Each message's size, counted once (the next request is estimated before every round)."""
        self.compactions = 0
        """How often this history was compacted."""
        self.after_compaction: list[ModelMessage] = []
        """The history as the latest compaction left it: where a turn that fails after it rolls back to."""
        self.new_id: str | None = None
        """The id a new session is created under (one handed out before the agent started); None: a new id."""
        self._store: SessionStore | None = None
        self._reserved: SessionStore | None = None
        """A new session made before `open` (`reserve`): on disk and locked, its agent not recorded yet."""
        self._keep = False

    @property
    def is_open(self) -> bool:
        return self._store is not None

    def open(self, working_dir: Path, agent_id: str, *, session_id: str | None, save: bool, model: Any) -> str | None:
        """Create the main agent's session, or resume `session_id` (locked while it runs); returns the session id."""
        from ..sessions import SessionStore

        if self._store is not None:
            return session_id
        if session_id is not None:
            store = SessionStore.open(working_dir, session_id)
            try:
                log, history = store.resume_agent(agent_id)
            except BaseException:
                store.close()
                raise
            self.messages = history  # what the file holds (after a stop() and start(), the same conversation)
            self.measured_from = len(history)
            self.resumed = bool(history)
        elif save:
            store, self._reserved = self._reserved or self._create(working_dir), None
            log = store.agent(agent_id, model=model)
            session_id = store.session_id
        else:
            return None
        self._store, self.log = store, log
        log.status("running")
        return session_id

    def reserve(self, working_dir: Path, *, session_id: str | None, save: bool) -> None:
        """Make a new session on disk now, before `open` records its agent (the model is still being built): an id
        handed out already names a session that exists. Nothing for a resumed session or without `save`."""
        if self._store is None and self._reserved is None and session_id is None and save:
            self._reserved = self._create(working_dir)

    def adopt(self, store: SessionStore) -> None:
        """Take over a new session made before the agent (`Agent.name_new_session`) as the one `open` records in."""
        if self._reserved is not None:
            self._reserved.close()
        self._reserved = store

    def _create(self, working_dir: Path) -> SessionStore:
        from ..sessions import SessionStore

        store = SessionStore.create(working_dir, self.new_id)
        if self._keep:
            store.mark_used()
        return store

    def close(self, status: str, turns: int) -> None:
        """Save the rest, record how the agent ended (`stopped`, `failed`, …) and release the session."""
        if self.log is not None:
            self.log.sync(self.messages)
            self.log.status(status, turns=turns, ended=True)
            self.log.close()
        for store in (self._store, self._reserved):
            if store is not None:
                store.close()
        self._store, self._reserved, self.log = None, None, None

    def keep(self) -> None:
        """Keep the session when it closes even if nothing was said in it (its id was handed out already); before
        the session is open, it is kept from its creation on."""
        self._keep = True
        if self._store is not None:
            self._store.mark_used()

    def save(self, *, durable: bool = True) -> None:
        """Append what is new in the history to the transcript: flushed, and fsync'ed if `durable`.

        Flushed lines survive a killed process; the fsync at the end of each round (a model
        response with no calls, or a batch of tool results) makes them survive the machine.
        """
        if self.log is not None:
            self.log.sync(self.messages, durable=durable)

    def prompt(self, text: str) -> None:
        """Record the person's prompt of a main agent's turn."""
        if self.log is not None:
            self.log.prompt(text)

    def shown(self, record: dict[str, Any]) -> None:
        """Save what the live view shows that the transcript does not hold."""
        if self.log is not None:
            self.log.shown(record)

    def call_finished(self, part: ToolReturnPart) -> None:
        """Save one call's result as soon as it is in (the others of its batch still running)."""
        from pydantic_ai.messages import ModelRequest

        if self.log is not None:
            self.log.call_finished(ModelRequest(parts=[part]))

    def continue_from(self, history: list[ModelMessage]) -> None:
        """Start from a saved or forked history (a child's `resume`, a fork); its responses measured other requests."""
        self.messages = list(history)
        self.measured_from = len(self.messages)

    def compacted(self, history: list[ModelMessage], *, kept: int, summary_response: ModelMessage) -> None:
        """Replace the history by its compacted form: a summary request, then its last `kept` messages.

        The transcript keeps the full record and marks where the compaction stands; a turn that fails
        after this rolls back to the compacted history, not to the one before it.
        """
        if self.log is not None:
            self.log.compacted(self.messages, kept=kept, summary=history[0], response=summary_response)
        self.messages = history
        self.measured_from = len(history)
        self.compactions += 1
        self.after_compaction = list(history)

    def add_user_parts(self, parts: list[Any], system_prompt: str) -> None:
        """Put the parts of a new prompt into the history: a first request (with the system prompt), the
        request the last turn ended on (it stopped at its limit after tool results), or a new request."""
        from pydantic_ai.messages import ModelRequest, SystemPromptPart

        if not self.messages:
            self.messages.append(ModelRequest(parts=[SystemPromptPart(system_prompt), *parts]))
        elif isinstance(last := self.messages[-1], ModelRequest):
            self.messages[-1] = ModelRequest(parts=[*last.parts, *parts])
        else:
            self.messages.append(ModelRequest(parts=parts))

    def note_interruption(self, unanswered: list[ToolReturnPart]) -> None:
        """End the history of a cancelled turn: the results of calls left without one, then a note."""
        from pydantic_ai.messages import ModelRequest, ModelResponse, UserPromptPart

        last = self.messages[-1]
        if isinstance(last, ModelResponse):
            self.messages.append(ModelRequest(parts=[*unanswered, UserPromptPart(INTERRUPTED_NOTE)]))
        else:
            self.messages[-1] = ModelRequest(parts=[*last.parts, UserPromptPart(INTERRUPTED_NOTE)])

    def final_answer(self) -> str:
        """The text of the last model response (what a turn's final `Response` carried)."""
        for message in reversed(self.messages):
            if message.kind == "response":
                return "".join(getattr(part, "content", "") for part in message.parts if part.part_kind == "text")
        return ""

    def saved_child(self, agent_id: str) -> list[ModelMessage] | None:
        """The saved conversation of a child (from an earlier process too), ready for the model; None if none."""
        return self.log.saved_child(agent_id) if self.log is not None else None

    @property
    def session_folder(self) -> Path | None:
        """The folder of the session this agent is saved in (None: not saved)."""
        return self.log.store.path if self.log is not None else None

    def saved_children(self) -> list[SavedAgent]:
        """The children this agent started that its session holds (this process's and earlier ones')."""
        return self.log.saved_children() if self.log is not None else []

    def child_log(self, child_id: str, spec: ChildSpec) -> AgentLog | None:
        """Where a child is saved: its own transcript in this session (None without one); a child resumed by
        `task(resume=…)` continues the transcript it had."""
        if self.log is None:
            return None
        if spec.agent_id is not None and self.log.has_saved_child(spec.agent_id):
            return self.log.resume_child(spec.agent_id, model=spec.config.model)
        return self.log.child(child_id, tool_call_id=spec.tool_call_id, prompt=spec.prompt, type=spec.agent_type,
                              model=spec.config.model, sandbox=spec.sandbox.name,
                              sandbox_limits=spec.sandbox.detail())


def saved_main_agent(session: str, working_dir: Path, agent_id: str | None) -> tuple[str, str, list[ModelMessage]]:
    """The session `session` to resume: its id, its main agent's id (kept by the resumed agent) and its history.

    `ValueError` if `agent_id` is given and is not the session's main agent.
    """
    from ..sessions import open_session

    saved = open_session(session, working_dir)
    if saved.summary.main_id is None:
        # made when its id was handed out, before its agent started (ACP's `session/new`), and never reached further
        # (its process ended first): it resumes as the empty session it is
        from ..tree.agent_ids import new_agent_id

        return saved.session_id, agent_id or new_agent_id(), []
    main = saved.main_id
    if agent_id is not None and agent_id != main:
        raise ValueError(f"agent_id: session {saved.session_id} belongs to {main}, not {agent_id}")
    return saved.session_id, main, saved.messages(repaired=True)
