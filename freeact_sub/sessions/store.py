"""`SessionStore`: one session's folder, its lock, its index, and a log per agent.

    <working_dir>/.freeact-sub/sessions/<session-id>/
        lock                 held (flock) by the one process that writes the session
        index.jsonl          who is whose child, from which `task` call, type, model, status, usage, times
        <agent-id>.jsonl     one transcript per agent (see `transcript.py`)
        shown.jsonl          what the live view showed that no transcript holds (see `AgentLog.shown`)

An agent writes through its `AgentLog`: `sync(history)` after each model response and each
batch of tool results, `status(...)` when its state changes. Children get their log from their
parent's (`log.child(...)`), so the whole tree writes into one session.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import secrets
import shutil
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..errors import SessionError
from ..usage import price_of
from .index import SavedAgent, SessionSummary, read_index
from .transcript import Durability, TranscriptWriter, read_messages, valid_for_model

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = ["SHOWN_FILE", "AgentLog", "SessionStore", "model_name", "new_session_id", "now", "sessions_dir"]

SHOWN_FILE = "shown.jsonl"
"""What the live view showed that no transcript holds: decisions and their sources, MCP calls from code."""


def sessions_dir(working_dir: Path | str) -> Path:
    """Where the sessions of a working directory live."""
    return Path(working_dir) / ".freeact-sub" / "sessions"


def now() -> str:
    """The current time, ISO 8601 in UTC, to the second."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def model_name(model: Any) -> str | None:
    """A model's name for the index (`openai:gpt-4.1`); never its provider settings or keys."""
    if model is None or isinstance(model, str):
        return model
    name = getattr(model, "model_name", None)
    system = getattr(model, "system", None)
    if isinstance(name, str):
        return f"{system}:{name}" if isinstance(system, str) and system else name
    return type(model).__name__


def new_session_id() -> str:
    """A new session's id (the time and four random hex digits), for `SessionStore.create`."""
    return _new_session_id()


def _new_session_id() -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(2)}"


class SessionStore:
    """The writer of one session; only one process at a time may hold it (a lock)."""

    def __init__(self, path: Path, session_id: str, *, new: bool = False) -> None:
        """Hold the session in `path` (locked now; `SessionError` if another process holds it). Use `create` or
        `open`; `new`: the folder was made for this session (removed on close if nothing was saved)."""
        self.path = path
        self.session_id = session_id
        self._lock: IO[bytes] | None = None
        self._index: IO[bytes] | None = None
        self._index_durable: Durability | None = None
        self._shown: IO[bytes] | None = None
        self._logs: dict[str, AgentLog] = {}
        self._new = new
        self._used = False
        """Whether a prompt or a message was saved: a new session that got neither is removed when it closes."""
        self._acquire()

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def create(cls, working_dir: Path | str, session_id: str | None = None) -> SessionStore:
        """A new session in `working_dir`, locked by this process; under `session_id` if given (an id from
        `new_session_id()` handed out before the session was made), else under a new one."""
        root = sessions_dir(working_dir)
        while True:
            chosen = session_id or _new_session_id()
            path = root / chosen
            try:
                path.mkdir(parents=True)
                break
            except FileExistsError:
                if session_id is not None:
                    raise SessionError(f"there is a session {session_id!r} in {root} already") from None
                continue
            except OSError as error:  # e.g. working_dir is a file, or not writable
                raise SessionError(f"cannot create the session folder {path}: {error.strerror}") from error
        store = cls(path, chosen, new=True)
        store.record({"record": "session", "id": chosen, "created": now()})
        return store

    @classmethod
    def open(cls, working_dir: Path | str, session_id: str) -> SessionStore:
        """An existing session, locked by this process; `SessionError` if it is missing or in use."""
        path = find_session(working_dir, session_id)
        store = cls(path, path.name)
        store.record({"record": "resumed", "at": now(), "pid": os.getpid()})
        return store

    def _acquire(self) -> None:
        lock = (self.path / "lock").open("a+b")
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().decode(errors="replace").strip() or "unknown"
            lock.close()
            raise SessionError(
                f"session {self.session_id} is in use by another process (pid {holder}); "
                "stop that one first, or start a new session"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()).encode())
        lock.flush()
        self._lock = lock
        self._index = (self.path / "index.jsonl").open("ab")
        self._index_durable = Durability(self._index)

    def close(self) -> None:
        """Close every log and the index, and release the lock; a new session that got no prompt is removed."""
        for log in list(self._logs.values()):
            log.close()
        if self._index_durable is not None:
            self._index_durable.close()
        self._index, self._index_durable = None, None
        if self._shown is not None:
            self._shown.close()
            self._shown = None
        if self._lock is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            if self._new and not self._used:
                shutil.rmtree(self.path, ignore_errors=True)  # opened and closed without a word: nothing to resume
            self._lock.close()
            self._lock = None

    @property
    def closed(self) -> bool:
        return self._lock is None

    # -- agents ----------------------------------------------------------------------------

    def summary(self) -> SessionSummary:
        """The index as written so far."""
        return read_index(self.path, self.session_id)

    def history(self, agent_id: str) -> list[ModelMessage]:
        """An agent's saved conversation, ready to be sent to a model (every tool call answered)."""
        return valid_for_model(read_messages(self.path / f"{agent_id}.jsonl"))

    def agent(
        self,
        agent_id: str,
        *,
        parent_id: str | None = None,
        tool_call_id: str | None = None,
        type: str = "main",
        model: Any = None,
        prompt: str = "",
        sandbox: str | None = None,
        sandbox_limits: str = "",
    ) -> AgentLog:
        """The log of a new agent of this session (its index record is written now)."""
        self.record(
            {
                **({"sandbox": sandbox} if sandbox else {}),
                **({"sandbox_limits": sandbox_limits} if sandbox_limits else {}),
                "record": "agent",
                "agent_id": agent_id,
                "parent_id": parent_id,
                "tool_call_id": tool_call_id,
                "type": type,
                "model": model_name(model),
                "prompt": prompt,
                "started": now(),
            }
        )
        return self._open_log(agent_id, ())

    def resume_agent(self, agent_id: str, *, model: Any = None) -> tuple[AgentLog, list[ModelMessage]]:
        """The log of an agent saved earlier, and its history ready for the model; it continues its own file.

        `model`: the model it runs on now, when that may differ from the one the index has for it."""
        summary = self.summary()
        if agent_id not in summary.agents and summary.main_id is None:  # a session made before its agent (ACP)
            return self.agent(agent_id, model=model), []
        saved = read_messages(self.path / f"{agent_id}.jsonl")
        if agent_id not in summary.agents:
            raise SessionError(f"session {self.session_id} has no agent {agent_id}")
        record = summary.agents[agent_id]
        resumed = {"record": "agent", "agent_id": agent_id, "parent_id": record.parent_id, "resumed": now()}
        if model is not None:
            resumed["model"] = model_name(model)
        self.record(resumed)
        log = self._open_log(agent_id, saved)
        log.turns = record.turns
        log.usage = [record.requests, record.input_tokens, record.output_tokens]
        log.cost = record.cost
        return log, valid_for_model(saved)

    def _open_log(self, agent_id: str, saved: Sequence[ModelMessage]) -> AgentLog:
        if self._index is None:
            raise SessionError(f"session {self.session_id} is closed")
        log = AgentLog(self, agent_id, TranscriptWriter(self.path / f"{agent_id}.jsonl", saved))
        self._logs[agent_id] = log
        return log

    def mark_used(self) -> None:
        """The session now holds a conversation: keep it when it closes."""
        self._used = True

    def forget(self, agent_id: str) -> None:
        """An agent's log was closed: the store no longer closes it with the session."""
        self._logs.pop(agent_id, None)

    def record(self, record: dict[str, Any], *, fsync: bool = False, used: bool = False) -> None:
        """Append one record to the session's index (an agent's status, usage, prompt); `used`: the session now
        holds something worth keeping (a new session nobody used is removed when it closes)."""
        if self._index is None:
            self._used = self._used or used
            return
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"  # may fail: then unused
        self._used = self._used or used
        self._index.write(line)
        self._index.flush()
        if fsync and self._index_durable is not None:
            self._index_durable.request()

    def shown(self, record: dict[str, Any]) -> None:
        """Append one record to `shown.jsonl`: how a call was decided, an MCP call a cell made (flushed, no fsync)."""
        if self._index is None:
            return
        if self._shown is None:
            self._shown = (self.path / SHOWN_FILE).open("ab")
        self._shown.write(json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str).encode() + b"\n")
        self._shown.flush()


class AgentLog:
    """Writes one agent's transcript and its index records."""

    def __init__(self, store: SessionStore, agent_id: str, writer: TranscriptWriter) -> None:
        self.store = store
        self.agent_id = agent_id
        self._writer = writer
        self.turns = 0
        self.usage = [0, 0, 0]  # requests, input tokens, output tokens
        self.cost: Decimal | None = None
        """USD of the responses that could be priced."""

    def sync(self, history: Sequence[ModelMessage], *, durable: bool = True) -> None:
        """Append what is new in `history` (flushed; fsync'ed if `durable`) and the agent's usage so far."""
        if self.store.closed or not self._writer.sync(history, durable=durable):
            return
        self.store.mark_used()
        self._count_usage()

    def _count_usage(self) -> None:
        """Add the responses written since the last count to the agent's usage record in the index."""
        if self._writer.responses:
            for response in self._writer.responses:
                usage = response.usage
                self.usage[0] += 1
                self.usage[1] += int(getattr(usage, "input_tokens", 0) or 0)
                self.usage[2] += int(getattr(usage, "output_tokens", 0) or 0)
                if (price := price_of(response)) is not None:
                    self.cost = (self.cost or Decimal(0)) + price
            self._writer.responses.clear()
            requests, input_tokens, output_tokens = self.usage
            record: dict[str, Any] = {
                "record": "usage",
                "agent_id": self.agent_id,
                "requests": requests,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
            }
            if self.cost is not None:
                record["cost"] = str(self.cost)
            self.store.record(record)

    def compacted(self, history: Sequence[ModelMessage], *, kept: int, summary: ModelMessage,
                  response: ModelMessage) -> None:
        """The agent compacted `history` to `[summary, *history[-kept:]]`; `response` wrote the summary (its
        tokens count in the agent's usage, though it is in no history)."""
        if self.store.closed:
            return
        self.sync(history)
        self._writer.compacted(history, kept, summary)
        self._writer.responses.append(response)
        self._count_usage()

    def call_finished(self, result: ModelMessage) -> None:
        """One call's result, saved as it finishes (before the other calls of its response end)."""
        if not self.store.closed:
            self._writer.provisional(result)

    def shown(self, record: dict[str, Any]) -> None:
        """Save what the live view showed of this agent that its transcript does not hold, as it happens.

        `{"kind": "decision", "call": …, "approved": …, "by": …}`: how a call was decided and by
        whom (`person`, `auto` (a standing decision when it was asked), `standing` (one made while it
        waited), `rule`, `hook`, or `cancelled`: the asking ended before anyone answered);
        `{"kind": "code_result", …}`: the result of an MCP tool a cell's code called.
        """
        self.store.shown({**record, "agent_id": self.agent_id})

    def prompt(self, text: str) -> None:
        """The main agent got a user prompt."""
        self.store.record({"record": "prompt", "agent_id": self.agent_id, "text": text, "at": now()}, used=True)

    def status(self, status: str, *, turns: int | None = None, ended: bool = False) -> None:
        """The agent's state changed (`running`, `idle`, `done`, `failed`, `cancelled`, …)."""
        if turns is not None:
            self.turns = turns
        self.store.record(
            {
                "record": "status",
                "agent_id": self.agent_id,
                "status": status,
                "turns": self.turns,
                "ended": now() if ended else None,
            },
            fsync=ended,
        )

    def child(
        self, agent_id: str, *, tool_call_id: str, prompt: str, type: str = "general", model: Any = None,
        sandbox: str | None = None, sandbox_limits: str = "",
    ) -> AgentLog:
        """The log of a subagent this agent starts with its `task` call `tool_call_id`."""
        return self.store.agent(
            agent_id, parent_id=self.agent_id, tool_call_id=tool_call_id, type=type, model=model, prompt=prompt,
            sandbox=sandbox, sandbox_limits=sandbox_limits,
        )

    def saved_child(self, agent_id: str) -> list[ModelMessage] | None:
        """The saved conversation of `agent_id`, ready for the model, if it is a child of this agent; else None.

        For `task(resume=…)` across process restarts: the child's transcript is in the session.
        """
        return self.store.history(agent_id) if self.has_saved_child(agent_id) else None

    def saved_children(self) -> list[SavedAgent]:
        """What the session's index says of each subagent this agent started, oldest first."""
        return [record for record in self.store.summary().agents.values() if record.parent_id == self.agent_id]

    def has_saved_child(self, agent_id: str) -> bool:
        """Whether the session holds a subagent `agent_id` that this agent started."""
        record = self.store.summary().agents.get(agent_id)
        return record is not None and record.parent_id == self.agent_id

    def resume_child(self, agent_id: str, *, model: Any = None) -> AgentLog:
        """The log of a saved child of this agent that runs again (on `model`): it continues its own transcript."""
        log, _ = self.store.resume_agent(agent_id, model=model)
        return log

    def close(self) -> None:
        self._writer.close()
        self.store.forget(self.agent_id)


def find_session(working_dir: Path | str, session_id: str) -> Path:
    """The folder of session `session_id` (or of the latest one for `latest`); `SessionError` if there is none."""
    root = sessions_dir(working_dir)
    if session_id == "latest":
        found = [p for p in root.iterdir() if (p / "index.jsonl").is_file()] if root.is_dir() else []
        if not found:
            raise SessionError(f"there is no saved session in {root}")
        return max(found, key=lambda p: ((p / "index.jsonl").stat().st_mtime, p.name))  # the one used last
    path = root / session_id
    if "/" in session_id or session_id in ("", ".", "..") or not (path / "index.jsonl").is_file():
        raise SessionError(f"there is no session {session_id!r} in {root}")
    return path
