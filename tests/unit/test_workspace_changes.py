"""Change sets read from a real copy-on-write view, and applied: merges, conflicts kept beside, links not followed.

Each view is the real thing (`sandbox/overlay_mount.py` through the sandbox's own script, a process of a few
tens of milliseconds); no kernel is needed to write through it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from freeact_sub.sandbox import ENFORCE_SCRIPT
from freeact_sub.sandbox.views import copy_on_write_platform_problem
from freeact_sub.workspaces import Journal, Workspace, apply_changes, mark_conflicts, read_changes

pytestmark = pytest.mark.skipif(copy_on_write_platform_problem() is not None,
                                reason=f"no copy-on-write views here: {copy_on_write_platform_problem()}")


def _write_in_view(folder: Path, place: Path, script: str) -> Workspace:
    """Run `script` (sh) in a fresh view of `folder`, under the sandbox that kernels get; its workspace."""
    (place / "ws").mkdir()
    workspace = Workspace.create(place / "ws", folder, "agent-test")
    plan = {"deny": [], "write": [str(folder)], "network": False, "scratch": str(place), "overlay": workspace.plan()}
    subprocess.run([sys.executable, ENFORCE_SCRIPT, json.dumps(plan), "--", "sh", "-c", script], cwd=folder,
                   check=True, capture_output=True)
    return workspace


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "d" / "e").mkdir(parents=True)
    (work / "a.txt").write_text("one\ntwo\nthree\n")
    (work / "d" / "z.txt").write_text("z\n")
    (work / "d" / "e" / "y.bin").write_bytes(b"\0\1")
    (work / "same.txt").write_text("same\n")
    return work


def test_the_change_set_holds_what_was_added_changed_and_removed_and_nothing_else(folder: Path, tmp_path: Path) -> None:
    workspace = _write_in_view(folder, tmp_path, "echo four >> a.txt; rm -r d; printf '\\0x' > new.bin; "
                                                 "ln -s /etc/hostname link; touch same.txt; mkfifo pipe")
    assert (folder / "d" / "z.txt").exists() and (folder / "a.txt").read_text() == "one\ntwo\nthree\n"
    changes = read_changes(workspace.upper, folder, agent_id="agent-test", started_ns=workspace.started_ns)
    assert {c.path: c.kind for c in changes.changes} == {
        "a.txt": "changed", "d/z.txt": "removed", "d/e/y.bin": "removed", "new.bin": "added", "link": "added"}
    by_path = {c.path: c for c in changes.changes}
    assert by_path["a.txt"].text and "+four" in by_path["a.txt"].diff
    assert not by_path["new.bin"].text and by_path["new.bin"].size == 2
    assert by_path["link"].link == "/etc/hostname"
    assert changes.skipped == ["pipe"]
    report = apply_changes(changes)
    assert [f.outcome for f in report.files] == ["applied"] * 5
    assert not (folder / "d").exists()  # the removed folder goes too, once empty
    assert os.readlink(folder / "link") == "/etc/hostname"
    assert (folder / "a.txt").read_text() == "one\ntwo\nthree\nfour\n"


def test_edits_that_do_not_overlap_are_merged_and_overlapping_ones_keep_the_folder_s_version(
    folder: Path, tmp_path: Path
) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "q").mkdir()
    first = _write_in_view(folder, tmp_path / "p", "sed -i 's/one/ONE/' a.txt; echo mine > same.txt")
    second = _write_in_view(folder, tmp_path / "q", "sed -i 's/three/THREE/' a.txt; echo theirs > same.txt")
    journal = Journal()
    one = read_changes(first.upper, folder, agent_id="agent-1", started_ns=first.started_ns)
    two = read_changes(second.upper, folder, agent_id="agent-2", started_ns=second.started_ns)
    assert {f.outcome for f in apply_changes(one, journal).files} == {"applied"}
    mark_conflicts(two)
    assert all(c.conflict for c in two.changes)  # shown before anyone decides
    report = {f.path: f for f in apply_changes(two, journal).files}
    assert report["a.txt"].outcome == "merged"
    assert (folder / "a.txt").read_text() == "ONE\ntwo\nTHREE\n"
    assert report["same.txt"].outcome == "kept" and report["same.txt"].saved_as == "same.agent-2.txt"
    assert (folder / "same.txt").read_text() == "mine\n"
    assert (folder / "same.agent-2.txt").read_text() == "theirs\n"


def test_a_link_in_the_folder_is_never_followed_when_a_set_is_applied(folder: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = _write_in_view(folder, tmp_path, "mkdir -p sub; echo x > sub/f.txt; echo y > a.txt")
    changes = read_changes(workspace.upper, folder, agent_id="agent-test", started_ns=workspace.started_ns)
    (folder / "sub").symlink_to(outside)  # someone put a link where the set writes, after it was read
    (folder / "a.txt").unlink()
    (folder / "a.txt").symlink_to(outside / "target.txt")
    (outside / "target.txt").write_text("keep me\n")
    report = {f.path: f for f in apply_changes(changes).files}
    assert report["sub/f.txt"].outcome == "failed" and "link" in report["sub/f.txt"].note
    assert sorted(os.listdir(outside)) == ["target.txt"]
    assert (outside / "target.txt").read_text() == "keep me\n"  # the link at a.txt was a conflict, kept as it is
    assert report["a.txt"].outcome == "kept" and (folder / "a.agent-test.txt").read_text() == "y\n"


async def test_apply_changes_is_decided_by_rules_like_any_call(tmp_path: Path) -> None:
    from freeact_sub import ApprovalPolicy
    from freeact_sub.policy.approvals import ApprovalRules
    from freeact_sub.policy.gate import ApprovalGate
    from freeact_sub.tools import Toolbox
    from freeact_sub.workspaces import ChangeSet, FileChange

    changes = ChangeSet(agent_id="agent-c", folder=tmp_path, upper=tmp_path, started_ns=0,
                        changes=[FileChange(path="a.txt", kind="added")])
    emitted: list[object] = []
    for rule, decision in (("allow", True), ("deny", False)):
        gate = ApprovalGate(agent_id="agent-main", approvals=ApprovalPolicy(), toolbox=Toolbox([]),
                            rules=ApprovalRules([("config", {"apply_changes": rule})]))
        request = await gate.ask("apply_changes", {"agent_id": "agent-c"}, "t/apply_changes", emitted.append,
                                 changes=changes)
        assert request.decision is decision and request.rule and request.changes is changes
    assert len(emitted) == 2  # decided by a rule, and still emitted, as every decision is
