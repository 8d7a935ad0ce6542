"""A session's index: an append-only `index.jsonl` of small records, folded into `SessionInfo`.

Records (one JSON object a line, `record` says which):

- `session`: `id`, `created` (first line);
- `agent`: an agent joined: `agent_id`, `parent_id` (None for the main agent), `tool_call_id`
  (the parent's `task` call), `type`, `model`, `sandbox` (a subagent's profile), `prompt`, `started`;
- `usage`: an agent's running totals after a model response: `requests`, `input_tokens`, `output_tokens`,
  `cost` (USD as a string, absent while no response was priced);
- `status`: an agent's state changed: `status`, `turns`, `ended`;
- `prompt`: the main agent got a user prompt (`text`, `at`);
- `resumed`: a process resumed the session (`at`).

Only what is needed to list and read sessions is written: never a config, an API key, an MCP
server's command, environment or headers.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from .transcript import TranscriptWarning

__all__ = ["SavedAgent", "SessionSummary", "read_index"]


@dataclass(kw_only=True)
class SavedAgent:
    """What the index says about one agent of a session."""

    agent_id: str
    parent_id: str | None = None
    """The agent that started it with a `task` call (None for the main agent)."""
    tool_call_id: str | None = None
    """The parent's `task` call that started it."""
    agent_type: str = "main"
    """`main` for the main agent, else the subagent's type (`general` unless a type was named)."""
    model: str | None = None
    sandbox: str | None = None
    """The sandbox profile its kernel ran under (None in sessions saved before it was recorded)."""
    sandbox_limits: str = ""
    """What that profile let its kernel reach and take (`SubagentStarted.sandbox_limits`), as shown live."""
    prompt: str = ""
    """The task's prompt (a subagent), or the first user prompt (the main agent)."""
    status: str = "running"
    """`running`, `idle` (main agent between turns), `stopped`, `done`, `failed`, `cancelled`, `turn_limit`,
    `rejected`; `interrupted` when the index says running but no process holds the session."""
    turns: int = 0
    started: str | None = None
    """ISO 8601 time (UTC)."""
    ended: str | None = None
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal | None = None
    """USD of its priced responses (None: none was priced, or saved before costs were recorded)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(kw_only=True)
class SessionSummary:
    """The index of one session, folded."""

    session_id: str
    path: Path
    created: str | None = None
    agents: dict[str, SavedAgent] = field(default_factory=dict)
    """Every agent of the session by id, in the order they joined (the main agent first)."""
    prompts: list[str] = field(default_factory=list)
    """The main agent's user prompts, in order."""
    resumed: list[str] = field(default_factory=list)
    """When the session was resumed."""

    @property
    def main_id(self) -> str | None:
        """The main agent's id."""
        return next((a.agent_id for a in self.agents.values() if a.parent_id is None), None)

    @property
    def first_prompt(self) -> str:
        return self.prompts[0] if self.prompts else ""

    @property
    def total_tokens(self) -> int:
        return sum(agent.total_tokens for agent in self.agents.values())

    def children(self, agent_id: str) -> list[SavedAgent]:
        """The agents `agent_id` started, in order."""
        return [a for a in self.agents.values() if a.parent_id == agent_id]


def read_index(path: Path, session_id: str) -> SessionSummary:
    """Fold `<path>/index.jsonl`; unreadable lines are skipped with a warning."""
    summary = SessionSummary(session_id=session_id, path=path)
    index = path / "index.jsonl"
    data = index.read_bytes() if index.exists() else b""
    lines = data.split(b"\n")
    if lines and lines[-1] != b"":
        lines[-1] = b""  # a partial last line: the process died while writing it
        warnings.warn(f"{index}: skipped a partial last line", TranscriptWarning, stacklevel=2)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            _apply(summary, record)
        except (ValueError, KeyError, TypeError, AttributeError):
            warnings.warn(f"{index}: skipped line {number}, not an index record", TranscriptWarning, stacklevel=2)
    return summary


def _apply(summary: SessionSummary, record: dict[str, Any]) -> None:
    kind = record["record"]
    if kind == "session":
        summary.created = record.get("created")
    elif kind == "agent":
        agent_id = record["agent_id"]
        known = summary.agents.get(agent_id)
        if known is None:
            summary.agents[agent_id] = SavedAgent(
                agent_id=agent_id,
                parent_id=record.get("parent_id"),
                tool_call_id=record.get("tool_call_id"),
                agent_type=record.get("type") or "main",
                model=record.get("model"),
                sandbox=record.get("sandbox"),
                sandbox_limits=record.get("sandbox_limits") or "",
                prompt=record.get("prompt") or "",
                started=record.get("started"),
            )
        else:  # the agent was resumed: it runs again (on another model, if the record names one)
            known.status, known.ended = "running", None
            known.model = record.get("model") or known.model
    elif kind == "usage":
        agent = summary.agents[record["agent_id"]]
        agent.requests = int(record.get("requests", 0))
        agent.input_tokens = int(record.get("input_tokens", 0))
        agent.output_tokens = int(record.get("output_tokens", 0))
        agent.cost = _decimal(record.get("cost"))
    elif kind == "status":
        agent = summary.agents[record["agent_id"]]
        agent.status = record["status"]
        agent.turns = int(record.get("turns", agent.turns))
        agent.ended = record.get("ended")
    elif kind == "prompt":
        summary.prompts.append(record["text"])
        main = summary.main_id
        if main is not None and not summary.agents[main].prompt:
            summary.agents[main].prompt = record["text"]
    elif kind == "resumed":
        summary.resumed.append(record.get("at", ""))


def _decimal(value: object) -> Decimal | None:
    """A cost the index holds (a string, for exactness); None if absent or not a number (a hand-edited file)."""
    if not isinstance(value, str | int | float):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None
