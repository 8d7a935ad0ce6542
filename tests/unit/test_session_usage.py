"""`freeact-sub sessions show` ends with a table of every agent of the session: type, status, tokens, cost."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from freeact_sub.sessions import open_session
from freeact_sub.sessions.store import sessions_dir
from freeact_sub.terminal.session_usage import agents_usage_table


def _session(workdir: Path, records: list[dict]) -> str:
    folder = sessions_dir(workdir) / "s-1"
    folder.mkdir(parents=True)
    lines = [{"record": "session", "id": "s-1", "created": "2026-11-28T10:00:00+00:00"}, *records]
    (folder / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return "s-1"


def test_each_agent_with_its_tokens_and_cost_and_the_total(tmp_path: Path) -> None:
    session = _session(tmp_path, [
        {"record": "agent", "agent_id": "agent-main", "parent_id": None, "type": "main"},
        {"record": "agent", "agent_id": "agent-kid", "parent_id": "agent-main", "type": "explore"},
        {"record": "agent", "agent_id": "agent-local", "parent_id": "agent-main", "type": "labeler"},
        {"record": "usage", "agent_id": "agent-main", "requests": 2, "input_tokens": 1200, "output_tokens": 30,
         "cost": "0.0125"},
        {"record": "usage", "agent_id": "agent-kid", "requests": 1, "input_tokens": 400, "output_tokens": 20,
         "cost": "0.0020"},
        {"record": "usage", "agent_id": "agent-local", "requests": 3, "input_tokens": 50, "output_tokens": 5},
        {"record": "status", "agent_id": "agent-kid", "status": "done"},
        {"record": "status", "agent_id": "agent-local", "status": "failed"},
        {"record": "status", "agent_id": "agent-main", "status": "stopped"},
    ])
    saved = open_session(session, tmp_path)
    console = Console(record=True, width=120, force_terminal=False)
    console.print(agents_usage_table(saved))
    text = console.export_text()
    assert "  agent-kid" in text  # a subagent is indented under its parent
    rows = [line.split() for line in text.splitlines() if line.startswith(("agent-", "  agent-", "total"))]
    assert rows == [
        ["agent-main", "main", "stopped", "2", "1,200", "30", "$0.0125"],
        ["agent-kid", "explore", "done", "1", "400", "20", "$0.0020"],
        ["agent-local", "labeler", "failed", "3", "50", "5", "–"],  # a model nobody prices: tokens only
        ["total", "6", "1,650", "55", "$0.0145"],
    ]


def test_a_session_saved_before_costs_were_recorded_shows_tokens_only(tmp_path: Path) -> None:
    session = _session(tmp_path, [
        {"record": "agent", "agent_id": "agent-main", "parent_id": None, "type": "main"},
        {"record": "usage", "agent_id": "agent-main", "requests": 1, "input_tokens": 10, "output_tokens": 2,
         "cost": "not a number"},
    ])
    console = Console(record=True, width=120, force_terminal=False)
    console.print(agents_usage_table(open_session(session, tmp_path)))
    assert console.export_text().splitlines()[-1].split() == ["total", "1", "10", "2", "–"]
