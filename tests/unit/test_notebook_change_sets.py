"""An `apply_changes` call in the notebook: a diff per file, and a checkbox that leaves a file out."""

from __future__ import annotations

from pathlib import Path

from freeact_sub import ApprovalRequest
from freeact_sub.notebook import CallView
from freeact_sub.workspaces import ChangeSet, FileChange


async def test_unticking_a_file_leaves_it_out_and_the_diff_is_escaped(tmp_path: Path) -> None:
    changes = ChangeSet(agent_id="agent-c0de", folder=tmp_path, upper=tmp_path, started_ns=0, changes=[
        FileChange(path="a.html", kind="changed", text=True, diff="--- a/a.html\n+++ b/a.html\n+<script>x</script>\n",
                   conflict="it changed in the folder too since the subagent started"),
        FileChange(path="b.txt", kind="added", size=3),
    ])
    request = ApprovalRequest(agent_id="agent-main", tool_name="apply_changes", tool_call_id="t/apply_changes",
                              tool_args={"agent_id": "agent-c0de"}, changes=changes)
    view = CallView(tool_name="apply_changes", tool_call_id="t/apply_changes", request=request)
    panel = next(child for child in view.children if "freeact-changes" in child._dom_classes)
    boxes = [child for child in panel.children if "freeact-change-file" in child._dom_classes]
    assert [box.description for box in boxes] == ["a.html", "b.txt"]
    html = "".join(getattr(child, "value", "") for child in panel.children if not hasattr(child, "indent"))
    assert "<script>" not in html and "it changed in the folder too" in html
    boxes[1].value = False
    view.decide(True)
    assert request.decision is True and [c.apply for c in changes.changes] == [True, False]
    assert all(box.disabled for box in boxes)
