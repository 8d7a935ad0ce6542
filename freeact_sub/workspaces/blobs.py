"""A content-addressed store of bytes: each version of a file (or a message of a history) kept once, by its hash.

Versions are appended to pack files (`packs/<n>.pack`) and found through the index, `index.bin`: one record of
`_RECORD.size` (49) bytes a version (the sha256 as its 32 bytes, pack, offset, stored size, compressed or not). A first
checkpoint of 10,000 files writes two files, not 10,000 (creating a file costs about a millisecond on a busy disk;
appending costs microseconds). The bytes go to the pack before their record, both with `os.write` (no buffer in the
process), so a host killed at any moment leaves an index that names only whole versions; a torn last record is cut
off when the store is opened again. `sync` makes them survive the machine.

Each record has a number, its place in the index (`number`, `digest_at`): the checkpoints' journal names a version
by it (a few digits, not 64), so a changed path costs the store about 110 bytes besides its own. A store written
before (`index.jsonl`, a JSON line `[sha256, pack, offset, size(, 1 if compressed)]` a version, about 85 bytes) is
read as it is, its lines numbered first; new versions go to `index.bin`, the old index is never written again.

A small version (at most `SMALL` bytes) is kept compressed (zlib) where that makes it smaller: small text files would
otherwise cost the store more than their own bytes. A larger version is streamed into the pack as it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

__all__ = ["BlobStore"]

_CHUNK = 1 << 20
_PACK_LIMIT = 1 << 30
"""A pack grows to about this many bytes, then the next one starts."""
SMALL = 1 << 16
"""Versions of at most this many bytes are kept compressed where that makes them smaller."""
_RECORD = struct.Struct("<32sIIQB")
"""An index record: sha256, pack, offset (a pack is cut at `_PACK_LIMIT`, so it fits 32 bits), stored size, 1 if
compressed."""


class BlobStore:
    """Bytes by their sha256, in the packs of `folder`."""

    def __init__(self, folder: Path) -> None:
        (folder / "packs").mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.bytes_written = 0
        """Bytes of new versions this store appended (its growth: what checkpoints cost on disk)."""
        self._where: dict[str, tuple[int, int, int, bool]] = {}
        """By hash: pack, offset, stored size, and whether it is compressed."""
        self._numbers: dict[str, int] = {}
        """By hash: the number of its (first) index record."""
        self._order: list[str | None] = []
        """By number: the hash its record names (None for a line that could not be read)."""
        self._lock = threading.Lock()
        self._readers: dict[int, int] = {}
        self._pack_sizes: dict[int, int] = {}
        self._read_old_index(folder / "index.jsonl")
        index = folder / "index.bin"
        self._read_index(index)
        self._index = os.open(index, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        packs = [int(p.stem) for p in (folder / "packs").glob("*.pack") if p.stem.isdigit()]
        self._pack_number = max(packs, default=0) + 1  # a new pack per opening: the old ones are never written
        self._pack = -1
        self._pack_size = 0
        self._dirty = False

    def _read_old_index(self, index: Path) -> None:
        """The JSON lines of a store written before `index.bin` (never written again)."""
        try:
            raw = index.read_bytes()
        except FileNotFoundError:
            return
        whole = raw[: raw.rfind(b"\n") + 1]
        if len(whole) != len(raw):
            os.truncate(index, len(whole))  # a torn last line (the old writer's): not a version
        for line in whole.splitlines():
            try:
                digest, pack, offset, size, *rest = json.loads(line)
                self._found(str(digest), int(pack), int(offset), int(size), rest == [1])
            except (ValueError, TypeError):
                self._order.append(None)  # still counted: the numbers after it stay what they were

    def _read_index(self, index: Path) -> None:
        try:
            raw = index.read_bytes()
        except FileNotFoundError:
            return
        whole = len(raw) - len(raw) % _RECORD.size
        if whole != len(raw):
            os.truncate(index, whole)  # a torn last record: the next one must not be appended to it
        for raw_digest, pack, offset, size, compressed in _RECORD.iter_unpack(raw[:whole]):
            self._found(raw_digest.hex(), pack, offset, size, compressed == 1)

    def _found(self, digest: str, pack: int, offset: int, size: int, compressed: bool) -> None:
        """Take in one index record read back; numbered even when its pack lacks the bytes (then not kept)."""
        self._order.append(digest)
        if pack not in self._pack_sizes:
            try:
                self._pack_sizes[pack] = (self.folder / "packs" / f"{pack}.pack").stat().st_size
            except OSError:
                self._pack_sizes[pack] = -1
        if offset + size <= self._pack_sizes[pack] and digest not in self._where:
            self._where[digest] = (pack, offset, size, compressed)
            self._numbers[digest] = len(self._order) - 1

    def has(self, digest: str) -> bool:
        return digest in self._where

    def number(self, digest: str) -> int | None:
        """The number of the index record of `digest` (kept already), or None."""
        return self._numbers.get(digest)

    def digest_at(self, number: int) -> str:
        """The hash the index record `number` names (`KeyError` if there is none, or it could not be read)."""
        digest = self._order[number] if 0 <= number < len(self._order) else None
        if digest is None:
            raise KeyError(f"no version number {number} in the checkpoints' store")
        return digest

    def put(self, data: bytes) -> str:
        """Keep `data`; its hash."""
        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            if digest not in self._where:
                packed = zlib.compress(data, 1) if len(data) <= SMALL else data
                small = len(packed) < len(data)
                offset = self._start()
                _write_all(self._pack, packed if small else data)
                self._added(digest, offset, len(packed) if small else len(data), compressed=small)
        return digest

    def put_fd(self, fd: int) -> str:
        """Keep what is left to read from `fd` (a file opened by the caller); its hash."""
        head = b""
        while len(head) <= SMALL and (chunk := os.read(fd, SMALL + 1 - len(head))):
            head += chunk
        if len(head) <= SMALL:  # all of it: a small version
            return self.put(head)
        digest = hashlib.sha256(head)
        with self._lock:
            offset = self._start()
            _write_all(self._pack, head)
            size = len(head)
            while chunk := os.read(fd, _CHUNK):
                digest.update(chunk)
                _write_all(self._pack, chunk)
                size += len(chunk)
            name = digest.hexdigest()
            if name in self._where:
                os.ftruncate(self._pack, offset)  # kept already: take the copy back
                self._pack_size = offset
            else:
                self._added(name, offset, size)
        return name

    def get(self, digest: str) -> bytes:
        """The bytes kept under `digest` (`KeyError` if none)."""
        return b"".join(self.chunks(digest))

    def chunks(self, digest: str) -> Iterator[bytes]:
        """The bytes kept under `digest`, a chunk at a time."""
        pack, offset, size, compressed = self._where[digest]
        fd, done = self._reader(pack), 0
        if compressed:  # small: read whole
            data = os.pread(fd, size, offset)
            if len(data) != size:
                raise OSError(f"a checkpoint's pack is shorter than its index says ({pack}.pack at {offset})")
            yield zlib.decompress(data)
            return
        while done < size:
            chunk = os.pread(fd, min(_CHUNK, size - done), offset + done)
            if not chunk:
                raise OSError(f"a checkpoint's pack is shorter than its index says ({pack}.pack at {offset + done})")
            done += len(chunk)
            yield chunk

    def sync(self) -> None:
        """Make what was kept since the last call survive the machine (it survives the process already)."""
        with self._lock:
            if not self._dirty:
                return
            self._dirty = False
            if self._pack >= 0:
                os.fsync(self._pack)
            os.fsync(self._index)

    def close(self) -> None:
        with self._lock:
            for fd in [self._index, self._pack, *self._readers.values()]:
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._index, self._pack, self._readers = -1, -1, {}

    # -- inside ------------------------------------------------------------------------------------------

    def _start(self) -> int:
        """The offset the next version goes to (a new pack when the current one is full)."""
        if self._pack < 0 or self._pack_size >= _PACK_LIMIT:
            if self._pack >= 0:
                os.close(self._pack)
                self._pack_number += 1
            path = self.folder / "packs" / f"{self._pack_number}.pack"
            self._pack = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            self._pack_size = 0
        return self._pack_size

    def _added(self, digest: str, offset: int, size: int, *, compressed: bool = False) -> None:
        record = _RECORD.pack(bytes.fromhex(digest), self._pack_number, offset, size, int(compressed))
        _write_all(self._index, record)  # after the bytes: the index never names what is not there
        self._where[digest] = (self._pack_number, offset, size, compressed)
        self._numbers[digest] = len(self._order)
        self._order.append(digest)
        self._pack_size = offset + size
        self.bytes_written += size + len(record)
        self._dirty = True

    def _reader(self, pack: int) -> int:
        with self._lock:
            if pack == self._pack_number and self._pack >= 0:
                return self._pack  # pread on the pack being written: the bytes are in the file already
            if pack not in self._readers:
                path = self.folder / "packs" / f"{pack}.pack"
                self._readers[pack] = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            return self._readers[pack]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
