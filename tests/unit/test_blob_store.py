"""The checkpoints' blob store: small versions kept compressed, read back whole, alongside raw ones."""

from __future__ import annotations

import os
from pathlib import Path

from freeact_sub.workspaces.blobs import _RECORD, SMALL, BlobStore


def _put_file(store: BlobStore, path: Path) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        return store.put_fd(fd)
    finally:
        os.close(fd)


def test_small_text_costs_the_store_less_than_its_bytes_and_every_version_reads_back(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    texts = [(f"{n},north,{n * 3}\n" * 60).encode() for n in range(12)]  # ~1 KB of CSV each
    paths = []
    for n, text in enumerate(texts):
        (tmp_path / f"t{n}.csv").write_bytes(text)
        paths.append(_put_file(store, tmp_path / f"t{n}.csv"))
    noise = os.urandom(3000)  # not smaller compressed: kept as it is
    large = os.urandom(SMALL + 10)  # streamed as it is
    (tmp_path / "large.bin").write_bytes(large)
    raw, big = store.put(noise), _put_file(store, tmp_path / "large.bin")
    assert store.bytes_written < sum(map(len, texts)) + len(noise) + len(large)
    store.close()
    again = BlobStore(tmp_path / "blobs")  # the index as a resumed session reads it
    assert [again.get(digest) for digest in paths] == texts
    assert again.get(raw) == noise and again.get(big) == large
    records = list(_RECORD.iter_unpack((tmp_path / "blobs" / "index.bin").read_bytes()))
    assert sum(1 for record in records if record[4] == 1) == 12  # the compressed ones are marked
    assert all(record[4] == 0 for record in records if record[0].hex() in (raw, big))  # the others as they are
    again.close()
