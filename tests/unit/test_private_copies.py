"""A private copy of the folder (`workspaces/copies.py`): what is copied, what is not, and its change set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from freeact_sub.workspaces import FolderTooLargeToCopy, Workspace, apply_changes
from freeact_sub.workspaces.folder import copies_root


@pytest.fixture
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "t"))
    (tmp_path / "t").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    return tmp_path


def test_a_copy_keeps_links_as_links_and_leaves_caches_and_the_host_s_files_out(tmp: Path) -> None:
    folder, outside = tmp / "work", tmp / "outside"
    (folder / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("not to be copied")
    (folder / "sub" / "a.txt").write_text("a\n")
    (folder / "out").symlink_to(outside)  # a link out of the folder: copied as a link, never followed
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "m.pyc").write_bytes(b"x")
    (folder / ".freeact-sub" / "sessions").mkdir(parents=True)
    os.mkfifo(folder / "pipe")
    workspace = Workspace.create_copy(folder, 1 << 20)
    copy = workspace.upper
    assert str(copy).startswith(copies_root())
    assert sorted(p.name for p in copy.iterdir()) == ["out", "sub"]
    assert (copy / "out").is_symlink() and os.readlink(copy / "out") == str(outside)
    assert (copy / "sub" / "a.txt").read_text() == "a\n"
    assert not workspace.read_changes()  # nothing touched: no change, and no file was read to know it
    workspace.remove()
    assert not workspace.folder.exists()


def test_its_change_set_is_what_the_child_changed_and_applies_like_a_view_s(tmp: Path) -> None:
    folder = tmp / "work"
    folder.mkdir()
    (folder / "keep.txt").write_text("same\n")
    (folder / "edit.txt").write_text("one\n")
    (folder / "gone.txt").write_text("bye\n")
    (folder / "old").mkdir()
    (folder / "old" / "x.txt").write_text("x\n")
    workspace = Workspace.create_copy(folder, 1 << 20, agent_id="agent-1")
    copy = workspace.upper
    (copy / "edit.txt").write_text("one\ntwo\n")
    (copy / "gone.txt").unlink()
    (copy / "old" / "x.txt").unlink()
    (copy / "old").rmdir()
    (copy / "new.txt").write_text("new\n")
    (copy / "keep.txt").write_text("same\n")  # written, but the same bytes: no change
    (copy / "__pycache__").mkdir()
    (copy / "__pycache__" / "c.pyc").write_bytes(b"c")  # a cache: never brought back
    changes = workspace.read_changes()
    assert {c.path: c.kind for c in changes.changes} == {
        "edit.txt": "changed",
        "gone.txt": "removed",
        "new.txt": "added",
        "old/x.txt": "removed",
    }
    assert changes.removed_folders == ["old"]
    report = apply_changes(changes)
    assert not report.by_outcome("failed")
    assert sorted(p.name for p in folder.iterdir()) == ["edit.txt", "keep.txt", "new.txt"]
    assert (folder / "edit.txt").read_text() == "one\ntwo\n"
    workspace.remove()


def test_a_folder_over_the_limit_is_not_copied_and_the_error_names_the_field(tmp: Path) -> None:
    folder = tmp / "work"
    folder.mkdir()
    (folder / "big.bin").write_bytes(b"x" * 2048)
    with pytest.raises(FolderTooLargeToCopy, match=r"isolation_copy_limit \(1,000 bytes\)"):
        Workspace.create_copy(folder, 1000)
    assert list(Path(copies_root()).iterdir()) == []  # nothing left behind


def test_the_copies_of_a_host_that_died_are_swept(tmp: Path) -> None:
    folder = tmp / "work"
    folder.mkdir()
    (folder / "a.txt").write_text("a")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = Path(copies_root()) / "copy-left"
    (left / "copy").mkdir(parents=True)
    (left / "owner").write_text(dead.stdout.strip())
    from freeact_sub.workspaces import folder as folder_module

    folder_module._swept.clear()
    workspace = Workspace.create_copy(folder, 1 << 20)
    assert not left.exists()
    workspace.remove()
