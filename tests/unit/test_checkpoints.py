"""Checkpoints of a folder on real files: what another process changed is seen (with inotify and without), the
store grows by the bytes changed, a torn journal line is cut off, and restoring never follows a link that
appeared on the way (the folder changed after it was last looked at) nor writes outside the folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from freeact_sub.workspaces.checkpoints import Checkpoints, FolderTooLarge
from freeact_sub.workspaces.folder_state import FolderState
from freeact_sub.workspaces.restore import write_back


def _tree(folder: Path) -> None:
    for n in range(30):
        (folder / f"d{n % 3}").mkdir(parents=True, exist_ok=True)
        (folder / f"d{n % 3}" / f"f{n}.txt").write_text(f"{n}\n")


@pytest.mark.parametrize("watch", [True, False])
def test_what_a_subprocess_changes_is_seen_and_nothing_else(tmp_path: Path, watch: bool) -> None:
    folder = tmp_path / "work"
    _tree(folder)
    (folder / ".freeact-sub").mkdir()
    state = FolderState(folder, watch=watch)
    try:
        assert len(state.look()) == 33 and state.look() == {}
        script = (
            "import os, shutil\nopen('d0/f0.txt', 'a').write('more')\nos.makedirs('new/deep')\n"
            "open('new/deep/x', 'w').write('x')\nshutil.rmtree('d2')\nopen('.freeact-sub/own', 'w').write('')"
        )
        subprocess.run([sys.executable, "-c", script], cwd=folder, check=True)
        changed = state.look()
        assert set(changed) == {
            "d0/f0.txt",
            "new",
            "new/deep",
            "new/deep/x",
            "d2",
            *(f"d2/f{n}.txt" for n in range(2, 30, 3)),
        }
        assert changed["d2"] is None and changed["new/deep/x"] is not None
        assert state.look() == {}
    finally:
        state.close()


def test_the_store_grows_by_the_bytes_changed_and_a_torn_line_is_cut_off(tmp_path: Path) -> None:
    folder, store = tmp_path / "work", tmp_path / "store"
    _tree(folder)
    points = Checkpoints(store, folder)
    points.take(label="first", turn=1)
    before = points.stored_bytes
    (folder / "big.bin").write_bytes(os.urandom(200_000))
    points.take(label="second", turn=1)
    assert 200_000 <= points.stored_bytes - before <= 1.01 * 200_000
    points.close()
    with open(store / "journal.jsonl", "ab") as journal:
        journal.write(b'{"n": 3, "kind": "tu')  # a host killed mid-line
    again = Checkpoints(store, folder)
    try:
        assert [p.label for p in again.checkpoints()] == ["first", "second"]
        assert again.take(label="third").number == 3
        again.restore(1)
        assert not (folder / "big.bin").exists()
    finally:
        again.close()


def test_a_folder_over_the_limit_gets_no_checkpoint_and_the_error_names_the_limit(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    _tree(folder)
    points = Checkpoints(tmp_path / "store", folder, limit=10)
    try:
        with pytest.raises(FolderTooLarge, match=r"checkpoint_limit \(10 bytes\)"):
            points.take(label="first")
    finally:
        points.close()


def test_restoring_refuses_a_link_that_appeared_on_the_way_and_writes_nothing_outside(tmp_path: Path) -> None:
    folder, outside = tmp_path / "work", tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    outside.mkdir()
    (folder / "sub" / "a.txt").write_text("inside\n")
    points = Checkpoints(tmp_path / "store", folder, watch=False)
    try:
        points.take(label="first")
        (folder / "sub" / "a.txt").unlink()
        points.take(label="second")  # the checkpoint's state: sub is a folder, a.txt is gone
        os.rmdir(folder / "sub")  # then, before the rewind looks again, sub becomes a link out of the folder
        os.symlink(outside, folder / "sub")
        target = {path: record for path, record in points.state.items()}
        target["sub/a.txt"] = next(iter(_records_of(points, "sub/a.txt")))
        report = write_back(folder, points.state, target, points.blobs)
    finally:
        points.close()
    assert report.failed == [("sub/a.txt", "a link is in the way (not followed)")]
    assert os.listdir(outside) == []


def _records_of(points: Checkpoints, path: str) -> list[tuple[str, int, int, int, int, int, str]]:
    """The records `path` had in the journal's lines, oldest first."""
    import json

    lines = (points.store / "journal.jsonl").read_bytes().splitlines()
    return [
        tuple(json.loads(line)["changed"][path]) for line in lines if json.loads(line)["changed"].get(path) is not None
    ]  # type: ignore[misc]


def test_env_files_stay_out_of_the_checkpoints(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    (folder / "sub").mkdir(parents=True)
    (folder / ".env").write_text("OPENAI_API_KEY=sk-kept-out\n")
    (folder / "sub" / ".env.local").write_text("TOKEN=also-kept-out\n")
    (folder / "data.txt").write_text("kept\n")
    points = Checkpoints(tmp_path / "store", folder)
    try:
        points.take(label="first")
    finally:
        points.close()
    stored = b"".join(p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert b"kept\n" in stored and b"sk-kept-out" not in stored and b"also-kept-out" not in stored


def test_histories_environments_and_caches_stay_out_of_the_checkpoints(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    for name, text in {
        ".git/objects/ab/cdef": "a git object",
        "node_modules/left-pad/index.js": "a package",
        "src/__pycache__/mod.cpython-311.pyc": "bytecode",
        "env/pyvenv.cfg": "home = /usr/bin",
        "env/lib/site.py": "an installed module",
        "src/mod.py": "print('kept')",
    }.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    points = Checkpoints(tmp_path / "store", folder)
    try:
        points.take(label="first")
    finally:
        points.close()
    stored = b"".join(p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert b"print('kept')" in stored
    assert not any(text in stored for text in (b"a git object", b"a package", b"bytecode", b"an installed module"))
