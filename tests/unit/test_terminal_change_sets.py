"""An `apply_changes` question in the terminal: the diff, file by file, and `f` to apply only some files."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from freeact_sub import Agent, AgentConfig, ApprovalRequest
from freeact_sub.terminal.session import Session
from freeact_sub.workspaces import ChangeSet, FileChange


def _request(tmp_path: Path) -> ApprovalRequest:
    changes = ChangeSet(agent_id="agent-c0de", folder=tmp_path, upper=tmp_path, started_ns=0, changes=[
        FileChange(path="notes.txt", kind="changed", text=True,
                   diff="--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1,2 @@\n one\n+two \x1b]0;title\x07\n",
                   conflict="it changed in the folder too since the subagent started"),
        FileChange(path="data.bin", kind="added", size=12),
        FileChange(path="old.txt", kind="removed"),
    ])
    return ApprovalRequest(agent_id="agent-main", tool_name="apply_changes", tool_call_id="t1/apply_changes",
                           tool_args={"agent_id": "agent-c0de", "files": changes.paths()}, changes=changes)


async def test_the_question_shows_each_file_its_conflict_and_its_diff_with_controls_drawn(tmp_path: Path) -> None:
    out = io.StringIO()
    session = Session(Agent(AgentConfig(model="test", working_dir=tmp_path)), Console(file=out, width=120),
                      ask_keys=False)
    session.renderer.show_request(_request(tmp_path))
    shown = out.getvalue()
    assert "[1] notes.txt: changed (+1 -0)" in shown and "⚠ it changed in the folder too" in shown
    assert "[2] data.bin: added (12 bytes)" in shown and "[3] old.txt: removed" in shown
    assert "+two" in shown and "\x1b]0;" not in shown  # the kernel's text cannot retitle the terminal


async def test_f_then_numbers_applies_only_those_files(tmp_path: Path) -> None:
    session = Session(Agent(AgentConfig(model="test", working_dir=tmp_path)), Console(file=io.StringIO(), width=120),
                      ask_keys=False)
    request = _request(tmp_path)
    session.desk.submit(request)
    for key in ["f", "1", " ", "3", "\r"]:
        session.desk.press(key)
    assert request.decision is True
    assert request.changes is not None
    assert [c.apply for c in request.changes.changes] == [True, False, True]
