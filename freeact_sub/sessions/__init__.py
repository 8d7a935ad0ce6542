"""Sessions that survive: every agent's conversation saved as it happens, listed, read and resumed.

A session is a folder, `<working_dir>/.freeact-sub/sessions/<session-id>/`, with one
append-only JSONL transcript per agent (pydantic-ai's own message serialization) and a small
index (who is whose child, from which `task` call, type, model, status, usage, start and end).
An `Agent` writes its session while it runs (`AgentConfig.save_sessions`, on by default) and
resumes one with `Agent(config, session="<id>")`.

Reading needs no running agent::

    from freeact_sub.sessions import list_sessions, open_session

    for saved in list_sessions(working_dir):
        print(saved.session_id, saved.created, saved.first_prompt, saved.total_tokens)
    saved = open_session("latest", working_dir)
    messages = saved.messages()                       # the main agent's pydantic-ai messages
    for child in saved.children():                    # every subagent, any depth
        events = saved.events(child.agent_id)         # its transcript as `AgentEvent`s
"""

from __future__ import annotations

import contextlib
import fcntl
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SessionError
from .index import SavedAgent, SessionSummary, read_index
from .replay import RESUME_NOTE, SavedDecision, UserPrompt, read_shown, replay
from .store import AgentLog, SessionStore, find_session, sessions_dir
from .transcript import INTERRUPTED_RESULT, TranscriptWarning, read_messages, valid_for_model

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

    from ..events import AgentEvent

__all__ = [
    "INTERRUPTED_RESULT",
    "RESUME_NOTE",
    "AgentLog",
    "SavedAgent",
    "SavedDecision",
    "SavedSession",
    "SessionError",
    "SessionStore",
    "TranscriptWarning",
    "UserPrompt",
    "list_sessions",
    "open_session",
    "sessions_dir",
]


class SavedSession:
    """A saved session, read from disk (it may be running in another process, or have ended)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.session_id = path.name
        self.summary: SessionSummary = read_index(path, path.name)
        """The index: agents, prompts, times."""
        self.in_use = _locked(path)
        """Whether a process holds the session now (it is being written)."""
        if not self.in_use:
            for agent in self.summary.agents.values():
                if agent.status == "running":
                    agent.status = "interrupted"  # nobody writes it any more: the process died mid-run

    def __repr__(self) -> str:
        return f"<SavedSession {self.session_id}: {len(self.agents)} agents, {self.total_tokens} tokens>"

    @property
    def created(self) -> str | None:
        """When the session started (ISO 8601, UTC)."""
        return self.summary.created

    @property
    def agents(self) -> dict[str, SavedAgent]:
        """Every agent by id, the main agent first."""
        return self.summary.agents

    @property
    def main_id(self) -> str:
        """The main agent's id."""
        main = self.summary.main_id
        if main is None:
            raise SessionError(f"session {self.session_id} has no main agent yet")
        return main

    @property
    def first_prompt(self) -> str:
        return self.summary.first_prompt

    @property
    def prompts(self) -> list[str]:
        """The user's prompts to the main agent, in order."""
        return list(self.summary.prompts)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens of every agent."""
        return self.summary.total_tokens

    def children(self, agent_id: str | None = None) -> list[SavedAgent]:
        """The subagents `agent_id` started (default: every subagent of the session, any depth)."""
        if agent_id is None:
            return [a for a in self.agents.values() if a.parent_id is not None]
        return self.summary.children(agent_id)

    def messages(
        self, agent_id: str | None = None, *, repaired: bool = False, record: bool = False
    ) -> list[ModelMessage]:
        """An agent's transcript (default: the main agent) as pydantic-ai messages: its history as the model has it.

        With `repaired=True`, calls left without a result by a crash get an "interrupted" result,
        as a resumed agent sends them to the model. With `record=True`, the rounds a compaction
        replaced are kept, before its summary request (`metadata["compaction"]`): the full record.
        """
        agent_id = agent_id or self.main_id
        if agent_id not in self.agents:
            raise SessionError(f"session {self.session_id} has no agent {agent_id!r}")
        messages = read_messages(self.path / f"{agent_id}.jsonl", record=record)
        return valid_for_model(messages) if repaired else messages

    def events(self, agent_id: str | None = None, *, children: bool = True) -> list[AgentEvent]:
        """An agent's transcript as the events its live stream had (its children's inline unless `children=False`).

        With each call's `ApprovalRequest` comes a `SavedDecision` saying how it was decided and by
        whom, and a cell's MCP calls from code come before its output (sessions saved by an older
        version have neither).
        """
        agent_id = agent_id or self.main_id

        def by_call(parent: str) -> dict[str, SavedAgent]:
            return {a.tool_call_id: a for a in self.summary.children(parent) if a.tool_call_id}

        def full(agent: str) -> list[ModelMessage]:
            return self.messages(agent, record=True)

        return replay(
            full(agent_id),
            agent_id,
            children=by_call(agent_id) if children else None,
            child_messages=full if children else None,
            grandchildren=by_call if children else None,
            shown=read_shown(self.path),
        )


def _locked(path: Path) -> bool:
    lock = path / "lock"
    if not lock.exists():
        return False
    with lock.open("rb") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        with contextlib.suppress(OSError):
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return False


def list_sessions(working_dir: Path | str = ".") -> list[SavedSession]:
    """The saved sessions of `working_dir`, the one used last first."""
    root = sessions_dir(working_dir)
    if not root.is_dir():
        return []
    paths = [p for p in root.iterdir() if (p / "index.jsonl").is_file()]
    paths.sort(key=lambda p: ((p / "index.jsonl").stat().st_mtime, p.name), reverse=True)
    return [SavedSession(p) for p in paths]


def open_session(session_id: str = "latest", working_dir: Path | str = ".") -> SavedSession:
    """A saved session by id (`latest`: the one used last); `SessionError` if there is none."""
    return SavedSession(find_session(working_dir, session_id))
