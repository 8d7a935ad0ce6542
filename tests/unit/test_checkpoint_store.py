"""What the checkpoints' store costs for small files that do not compress, and that a store written by the version
before (a JSON index, journal records with the full sha256) is still read, rewound to and added to."""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from pathlib import Path

from freeact_sub.workspaces.blobs import _RECORD
from freeact_sub.workspaces.checkpoints import Checkpoints


def _store_bytes(store: Path) -> int:
    """The store's size as the bench counts it: the bytes of its files (packs, index, journal), not disk blocks."""
    return sum(path.stat().st_size for path in store.rglob("*") if path.is_file())


def test_twelve_small_files_that_do_not_compress_cost_at_most_1_1x_their_bytes(tmp_path: Path) -> None:
    folder, store = tmp_path / "work", tmp_path / "store"
    (folder / "d").mkdir(parents=True)
    points = Checkpoints(store, folder)
    try:
        points.take(label="first")
        for turn in range(3):
            before = _store_bytes(store)
            for n in range(12):
                (folder / "d" / f"r{n}.bin").write_bytes(os.urandom(1300))
            points.take(label=f"turn {turn}")
            assert _store_bytes(store) - before <= 1.1 * 12 * 1300
        points.restore(2)
        assert sorted(path.name for path in (folder / "d").iterdir()) == sorted(f"r{n}.bin" for n in range(12))
    finally:
        points.close()


def _old_store(store: Path, folder: Path) -> dict[str, bytes]:
    """A store as the version before wrote it: `index.jsonl` (one version compressed) and a journal line without
    `v`, naming versions by their sha256; the folder as that checkpoint has it."""
    files = {"a.txt": b"alpha\n" * 40, "b.bin": os.urandom(500)}
    (store / "blobs" / "packs").mkdir(parents=True)
    pack, index, changed = b"", [], {}
    for name, data in files.items():
        digest = hashlib.sha256(data).hexdigest()
        kept = zlib.compress(data, 1) if name == "a.txt" else data
        index.append([digest, 1, len(pack), len(kept), *([1] if name == "a.txt" else [])])
        pack += kept
        (folder / name).write_bytes(data)
        info = os.stat(folder / name)
        changed[name] = ["f", 0o644, len(data), info.st_mtime_ns, info.st_ino, info.st_ctime_ns, digest]
        os.chmod(folder / name, 0o644)
    (store / "blobs" / "packs" / "1.pack").write_bytes(pack)
    (store / "blobs" / "index.jsonl").write_text("".join(json.dumps(line) + "\n" for line in index))
    line = {"n": 1, "kind": "turn", "label": "old", "turn": 1, "at": 1.0, "changed": changed, "history": []}
    (store / "journal.jsonl").write_text(json.dumps(line) + "\n")
    return files


def test_a_store_written_before_is_read_rewound_to_and_added_to(tmp_path: Path) -> None:
    folder, store = tmp_path / "work", tmp_path / "store"
    folder.mkdir()
    files = _old_store(store, folder)
    points = Checkpoints(store, folder)  # a resumed old session
    try:
        assert [p.label for p in points.checkpoints()] == ["old"]
        (folder / "a.txt").write_bytes(b"changed\n")
        (folder / "b.bin").unlink()
        (folder / "c.bin").write_bytes(b"new")
        assert points.take(label="new").number == 2
        (folder / "a.txt").write_bytes(files["b.bin"])  # a version the old index holds, named now by its number
        assert points.take(label="newer").number == 3
        points.restore(1)
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == files
    finally:
        points.close()
    again = Checkpoints(store, folder)  # old and new lines, old and new index, read together
    try:
        again.restore(3)
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == {"a.txt": files["b.bin"], "c.bin": b"new"}
        again.restore(2)
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == {"a.txt": b"changed\n", "c.bin": b"new"}
    finally:
        again.close()


def test_a_torn_index_record_is_cut_off_and_the_versions_before_it_read_back(tmp_path: Path) -> None:
    folder, store = tmp_path / "work", tmp_path / "store"
    folder.mkdir()
    (folder / "x.bin").write_bytes(b"one")
    points = Checkpoints(store, folder)
    points.take(label="first")
    points.close()
    with open(store / "blobs" / "index.bin", "ab") as index:
        index.write(b"\x01" * 20)  # a host killed mid-record
    again = Checkpoints(store, folder)
    try:
        assert (store / "blobs" / "index.bin").stat().st_size % _RECORD.size == 0
        (folder / "x.bin").write_bytes(b"two")
        again.take(label="second")
        again.restore(1)
        assert (folder / "x.bin").read_bytes() == b"one"
    finally:
        again.close()


def test_a_line_naming_a_lost_version_keeps_its_place_and_the_others_still_restore(tmp_path: Path) -> None:
    folder, store = tmp_path / "work", tmp_path / "store"
    folder.mkdir()
    (folder / "x.bin").write_bytes(b"one")
    points = Checkpoints(store, folder)
    points.take(label="first")
    (folder / "x.bin").write_bytes(b"two")
    points.take(label="second")
    points.take(label="third")
    points.close()
    index = store / "blobs" / "index.bin"
    os.truncate(index, index.stat().st_size - _RECORD.size)  # the record of "two" lost with the machine
    again = Checkpoints(store, folder)
    try:
        assert [p.label for p in again.checkpoints()] == ["first", "second", "third"]
        again.restore(1)
        assert (folder / "x.bin").read_bytes() == b"one"
    finally:
        again.close()
