"""Checkpoints of the working folder, one before each turn of an agent, and rewinding to one.

Before a turn's tool calls run, `Checkpoints.take` records what changed in the folder since the last checkpoint
(`FolderState`: inotify, then only the folders it names): the new bytes of each changed file go into a
content-addressed store (`BlobStore`), and one line in `journal.jsonl` says which paths changed to what, with
the hashes of the conversation's messages at that moment. The first checkpoint records every file (the base the
others change); later ones only what changed, so the store grows by about the bytes the turns changed.

Rewinding (`restore`) writes the folder back to a checkpoint's state: only the paths that differ, each reached
from the folder without following a link (`below.parent_of`), a file written beside its place and renamed over
it. A "restored" line then records the folder as it is, so the journal's state is the folder's again. The
journal is appended and fsync'ed: a host killed at any moment leaves the checkpoints before it readable.

A line (`"v": 2`) names a file's version by its number in the store's index, its change time by how far it is
from its modification time, and its modification time by how far it is from the line's `t0` (`_encode`): a changed
path costs its line about 55 bytes, not 150. Lines written before (no `v`: a record as it is, the version's
sha256 in full) are read as they are.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .blobs import BlobStore
from .folder_state import FolderState, FolderTooLarge, Record, Status
from .restore import RestoreReport, write_back

__all__ = ["Checkpoint", "CheckpointKind", "Checkpoints", "FolderTooLarge"]

CheckpointKind = Literal["turn", "rewind"]

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    """The folder and the conversation before one turn (or before a rewind): what `Agent.rewind` goes back to."""

    number: int
    """Its number over the agent's life (1, 2, …): what `Agent.rewind(number)` takes."""
    kind: CheckpointKind
    """`turn`: before a turn's calls; `rewind`: the state a rewind left (rewinding to it undoes that rewind)."""
    label: str
    """The prompt of the run the turn belongs to, or what the rewind was."""
    turn: int
    """The turn's number within its run (1 for the run's first)."""
    at: float
    """When it was taken (`time.time()`)."""
    files: tuple[str, ...] = ()
    """The files (and folders) that turn changed, or that the rewind changed; empty while unknown."""

    def line(self) -> str:
        """One line for a list of turns: number, what, the files changed."""
        shown = ", ".join(self.files[:6]) + (f", … ({len(self.files)} in all)" if len(self.files) > 6 else "")
        what = f"turn {self.turn} of “{self.label}”" if self.kind == "turn" else self.label
        return f"{self.number}. {what}: " + (shown or "no files changed")


@dataclass
class _Line:
    number: int
    kind: str
    label: str
    turn: int
    at: float
    changed: dict[str, Record | None]
    history: list[str] = field(default_factory=list)


class Checkpoints:
    """The checkpoints of one agent's working folder, kept in `store` (a folder of the host's)."""

    def __init__(self, store: Path, working_dir: Path, *, limit: int | None = None, watch: bool = True) -> None:
        """Open (or start) the checkpoints in `store` for `working_dir`; a saved journal is read back. `limit`: the
        most bytes the folder may hold at the first checkpoint (`FolderTooLarge` beyond)."""
        store.mkdir(parents=True, exist_ok=True)
        self.store = store
        self.working_dir = Path(os.path.realpath(working_dir))
        self.blobs = BlobStore(store / "blobs")
        self.folder = FolderState(self.working_dir, watch=watch, max_bytes=limit)
        self._lines: list[_Line] = _read_journal(store / "journal.jsonl", self.blobs)  # a torn last line is cut off
        self.state: dict[str, Record] = {}
        """Every path as the last line has it."""
        for line in self._lines:
            _fold(self.state, line.changed)
        if self.state:  # resumed: the folder's status as the journal left it, so the first look compares to it
            self.folder.forget(self.state, {path: _status_of(record) for path, record in self.state.items()})
        self._journal = open(store / "journal.jsonl", "ab")  # held open for the agent's life
        self._lock = threading.Lock()
        self._pending: dict[str, Status | None] = {}
        self.limit = limit

    # -- taking ---------------------------------------------------------------------------------------

    def take(
        self, *, kind: CheckpointKind = "turn", label: str = "", turn: int = 0, history: list[str] | None = None
    ) -> Checkpoint:
        """Record the folder as it is now (what changed since the last checkpoint) and the conversation's
        messages (`history`: their hashes, each put in `blobs` already); returns the new checkpoint."""
        with self._lock:
            changed = self._look()
            records = self._records(changed)
            number = 1 + max((line.number for line in self._lines), default=0)
            line = _Line(number, kind, label, turn, time.time(), records, list(history or []))
            self._append(line)
            return self._checkpoint(len(self._lines) - 1)

    def _look(self) -> dict[str, Status | None]:
        changed, self._pending = {**self._pending, **self.folder.look()}, {}
        return changed

    def _records(self, changed: dict[str, Status | None]) -> dict[str, Record | None]:
        """The records of the changed paths, with their bytes stored; paths whose record did not change left out."""
        out: dict[str, Record | None] = {}
        root = os.open(self.working_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for path, status in sorted(changed.items()):
                record = None if status is None else self._record(root, path, status)
                old = self.state.get(path)
                if record is None and old is None:
                    continue
                if record is not None and old is not None and _same(record, old) and record[:6] == old[:6]:
                    continue
                out[path] = record
        finally:
            os.close(root)
        return out

    def _record(self, root: int, path: str, status: Status) -> Record | None:
        from .below import parent_of

        kind = status[0]
        try:
            with parent_of(root, path) as (fd, name):
                if kind == "l":
                    return (*status, os.readlink(name, dir_fd=fd))
                if kind != "f":
                    return (*status, "")
                file = os.open(name, _READ_FLAGS, dir_fd=fd)
                try:
                    now = os.fstat(file)
                    if not stat.S_ISREG(now.st_mode):
                        return None
                    digest = self.blobs.put_fd(file)
                finally:
                    os.close(file)
                # the status as read (it may have changed since the look): the next look compares to this
                return (
                    "f",
                    stat.S_IMODE(now.st_mode),
                    now.st_size,
                    now.st_mtime_ns,
                    now.st_ino,
                    now.st_ctime_ns,
                    digest,
                )
        except OSError:  # gone, or a link in the way since the look: as it is now, it is not there
            return None

    def _append(self, line: _Line) -> None:
        self.blobs.sync()  # the versions a line names survive the machine before the line does
        t0 = min((r[3] for r in line.changed.values() if r is not None), default=0)
        record = {
            "v": 2,
            "n": line.number,
            "kind": line.kind,
            "label": line.label,
            "turn": line.turn,
            "at": line.at,
            "t0": t0,
            "changed": {path: _encode(r, t0, self.blobs) for path, r in line.changed.items()},
            "history": line.history,
        }
        self._journal.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
        self._journal.flush()  # survives the process now
        if line.changed:  # and the machine: a line that only names messages waits for the next (the transcript
            os.fsync(self._journal.fileno())  # holds the messages, fsync'ed each round)
        self._lines.append(line)
        _fold(self.state, line.changed)

    # -- reading ----------------------------------------------------------------------------------------

    def checkpoints(self) -> list[Checkpoint]:
        """The checkpoints, oldest first, each with the files its turn changed (the last: changed so far)."""
        with self._lock:
            self._pending.update(self.folder.look())
            return [self._checkpoint(i) for i, line in enumerate(self._lines) if line.kind != "restored"]

    def history(self, number: int) -> list[bytes]:
        """The conversation's messages (serialized) at checkpoint `number`."""
        return [self.blobs.get(digest) for digest in self._line(number).history]

    @property
    def stored_bytes(self) -> int:
        """Bytes of file versions and messages this process added to the store."""
        return self.blobs.bytes_written

    def _line(self, number: int) -> _Line:
        for line in self._lines:
            if line.number == number and line.kind != "restored":
                return line
        known = [line.number for line in self._lines if line.kind != "restored"]
        span = f"1 to {max(known)}" if known else "none yet"
        raise ValueError(f"no checkpoint {number} (there are {span})")

    def _checkpoint(self, index: int) -> Checkpoint:
        line = self._lines[index]
        after = self._lines[index + 1].changed if index + 1 < len(self._lines) else self._pending
        return Checkpoint(
            number=line.number,
            kind="rewind" if line.kind == "rewind" else "turn",
            label=line.label,
            turn=line.turn,
            at=line.at,
            files=tuple(sorted(after)),
        )

    # -- rewinding ----------------------------------------------------------------------------------------

    def restore(self, number: int) -> RestoreReport:
        """Write the folder back to checkpoint `number` (take a `rewind` checkpoint first, to undo it by)."""
        with self._lock:
            target: dict[str, Record] = {}
            for line in self._lines:
                _fold(target, line.changed)
                if line.number == number and line.kind != "restored":
                    break
            else:
                self._line(number)  # raises: no such checkpoint
            report = write_back(self.working_dir, self.state, target, self.blobs)
            root = os.open(self.working_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                now = {path: self.folder.status_of(root, path) for path in report.touched}
            finally:
                os.close(root)
            self.folder.forget(report.touched, now)
            changed: dict[str, Record | None] = {}
            for path, status in now.items():
                content = target[path][6] if path in target else ""
                changed[path] = None if status is None else (*status, content)
            self._append(_Line(0, "restored", f"rewound to {number}", 0, time.time(), changed))
            return report

    def close(self) -> None:
        """Stop watching the folder and close the journal (the store stays)."""
        self.folder.close()
        self.blobs.close()
        with contextlib.suppress(OSError):
            self._journal.close()


def _status_of(record: Record) -> Status:
    return (record[0], record[1], record[2], record[3], record[4], record[5])


def _same(a: Record, b: Record) -> bool:
    """Whether two records hold the same thing (kind, mode, content), whatever their times."""
    return a[0] == b[0] and a[1] == b[1] and a[6] == b[6]


def _fold(state: dict[str, Record], changed: dict[str, Record | None]) -> None:
    for path, record in changed.items():
        if record is None:
            state.pop(path, None)
        else:
            state[path] = record


def _encode(record: Record | None, t0: int, blobs: BlobStore) -> list[Any] | None:
    """A record as a line of version 2 has it: times as differences, a file's version by its number in `blobs`."""
    if record is None:
        return None
    kind, mode, size, mtime, ino, ctime, content = record
    number = blobs.number(content) if kind == "f" else None
    return [kind, mode, size, mtime - t0, ino, ctime - mtime, content if number is None else number]


def _decode(raw: list[Any] | None, t0: int, blobs: BlobStore) -> Record | None:
    if raw is None:
        return None
    kind, mode, size, mtime, ino, ctime, content = raw
    if isinstance(content, int) and not isinstance(content, bool):
        try:
            content = blobs.digest_at(content)
        except KeyError:  # its record lost (the machine, not the host, died): the line and the others still count
            content = f"missing version {content}"
    return (str(kind), int(mode), int(size), t0 + int(mtime), int(ino), t0 + int(mtime) + int(ctime), str(content))


def _read_journal(path: Path, blobs: BlobStore) -> list[_Line]:
    """The journal's lines; a torn last line (a host killed mid-write) is left out."""
    lines: list[_Line] = []
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return lines
    whole = raw[: raw.rfind(b"\n") + 1]
    if len(whole) != len(raw):  # the next line must not be appended to a torn one
        os.truncate(path, len(whole))
    for text in whole.split(b"\n"):
        if not text.strip():
            continue
        try:
            data: dict[str, Any] = json.loads(text)
            if data.get("v") == 2:
                t0 = int(data["t0"])
                changed = {p: _decode(r, t0, blobs) for p, r in data["changed"].items()}
            else:  # written before version 2: each record as it is
                changed = {p: (tuple(r) if r is not None else None) for p, r in data["changed"].items()}
            lines.append(
                _Line(
                    int(data["n"]),
                    str(data["kind"]),
                    str(data["label"]),
                    int(data["turn"]),
                    float(data["at"]),
                    changed,
                    list(data.get("history", [])),
                )
            )
        except (ValueError, KeyError, TypeError):
            break
    return lines
