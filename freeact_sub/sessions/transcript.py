"""One agent's transcript: an append-only JSONL file of pydantic-ai messages.

Each line is one `ModelMessage` exactly as pydantic-ai's `ModelMessagesTypeAdapter` serializes
it, or a control record `{"kind": "truncate", "keep": N}` saying that the agent's history was
cut back to its first N messages (a turn rolled back after a failed model request, a last
request that grew by a part, or provisional lines: the result of each call, written as it
finishes while other calls of the same response still run). Replaying the lines in order gives
the history the agent had; after a crash, provisional results stand for the calls that finished.

`TranscriptWriter.sync(history)` appends what changed since the last call, so the agent only
says *when* to save, never *what*. Each append is written and flushed before `sync` returns (a
process killed with SIGKILL right after loses nothing: the data is with the operating system);
the fsync that makes it survive a power cut follows at once in a background thread
(`Durability`), so a round does not wait for the disk. `read_messages()` skips a
partial or corrupted line with a `TranscriptWarning`, and `valid_for_model()` makes a history
cut short by a crash one a model accepts: every tool call gets a result.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = [
    "INTERRUPTED_RESULT",
    "Durability",
    "TranscriptWarning",
    "TranscriptWriter",
    "read_messages",
    "valid_for_model",
]

INTERRUPTED_RESULT = (
    "[Interrupted: the session ended before this call finished; its result is unknown. "
    "The kernel it ran in is gone.]"
)
_TRUNCATE = b'{"kind":"truncate"'
_COMPACTED = b'{"kind":"compacted"'


class TranscriptWarning(UserWarning):
    """A transcript line could not be read (a partial last line after a crash, or a corrupted one); it was skipped."""


def _adapter() -> Any:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    return ModelMessagesTypeAdapter


_message_adapters: dict[type, Any] = {}


def _message_adapter(kind: type) -> Any:
    adapter = _message_adapters.get(kind)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _message_adapters[kind] = TypeAdapter(kind)
    return adapter


def dump_message(message: ModelMessage) -> bytes:
    """One message exactly as pydantic-ai's `ModelMessagesTypeAdapter` writes it inside a list.

    Through an adapter of the message's own class: the same bytes, a third of the time (no
    list and no union to dispatch; ~20 µs instead of ~60 µs a message, twice a round).
    """
    return _message_adapter(type(message)).dump_json(message)


_fsyncs: ThreadPoolExecutor | None = None
_fsyncs_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _fsyncs
    with _fsyncs_lock:
        if _fsyncs is None:
            _fsyncs = ThreadPoolExecutor(max_workers=2, thread_name_prefix="freeact-fsync")
        return _fsyncs


class Durability:
    """Fsyncs one open file in a background thread after each `request()`; requests made meanwhile are coalesced.

    Every request is followed by an fsync that starts after it, so what was flushed before a
    request reaches the disk. `close()` waits for it and fsyncs once more.
    """

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._lock = threading.Lock()
        self._wanted = False
        self._idle = threading.Event()
        self._idle.set()

    def request(self) -> None:
        with self._lock:
            self._wanted = True
            if not self._idle.is_set():
                return  # the running worker loops once more
            self._idle.clear()
        _executor().submit(self._run)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._wanted:
                    self._idle.set()
                    return
                self._wanted = False
            try:
                os.fsync(self._handle.fileno())
            except (OSError, ValueError):  # closed meanwhile: close() fsyncs itself
                pass

    def close(self) -> None:
        """Wait for a pending fsync, fsync once more, and close the file."""
        self._idle.wait()
        if not self._handle.closed:
            try:
                self._handle.flush()
                os.fsync(self._handle.fileno())
            except OSError:
                pass
            self._handle.close()


class TranscriptWriter:
    """Appends an agent's history to its JSONL file as it grows."""

    def __init__(self, path: Path, saved: Sequence[ModelMessage] = ()) -> None:
        self.path = path
        self._saved: list[ModelMessage] = list(saved)
        """The history as the file has it now (the same objects as the agent's history, compared by identity)."""
        _drop_torn_line(path)
        self._file = path.open("ab")
        self._durable = Durability(self._file)
        self.responses: list[Any] = []
        """Model responses appended by this writer (for usage totals)."""
        self._provisional = False
        """Whether lines were written past the saved history (results of calls still running beside others)."""

    def provisional(self, message: ModelMessage) -> None:
        """Write a message the history does not hold yet: one tool result while other calls of its response run.

        A crash then leaves it in the file (a call that finished is never told as interrupted);
        the next `sync` cuts such lines off first and writes the history as it really is.
        """
        self._file.write(dump_message(message) + b"\n")
        self._file.flush()
        self._durable.request()
        self._provisional = True

    def sync(self, history: Sequence[ModelMessage], *, durable: bool = True) -> bool:
        """Append what `history` has that the file lacks and flush it; fsync too if `durable`.

        Returns whether anything was written. A flushed line survives the process (SIGKILL);
        the fsync makes it survive the machine.
        """
        saved = self._saved
        grown = len(history) >= len(saved)
        if grown and (not saved or (history[0] is saved[0] and history[len(saved) - 1] is saved[-1])):
            # The agent only appended. It never replaces a message in the middle of its history, only
            # cuts it back (a rollback) or replaces the last one, so the ends tell: O(1) twice a round.
            common = len(saved)
        else:
            common = 0
            limit = min(len(saved), len(history))
            # by value for a history loaded or copied elsewhere (a resumed child)
            while common < limit and (history[common] is saved[common] or history[common] == saved[common]):
                common += 1
        if common == len(saved) == len(history) and not self._provisional:
            return False
        lines: list[bytes] = []
        if common < len(saved) or self._provisional:
            self._provisional = False
            lines.append(json.dumps({"kind": "truncate", "keep": common}, separators=(",", ":")).encode())
        for message in history[common:]:
            lines.append(dump_message(message))
            if message.kind == "response":
                self.responses.append(message)
        self._file.write(b"\n".join(lines) + b"\n")
        self._file.flush()
        if durable:
            self._durable.request()
        if common == len(saved):
            saved.extend(history[common:])
        else:
            self._saved = list(history)
        return True

    def compacted(self, history: Sequence[ModelMessage], kept: int, summary: ModelMessage) -> None:
        """The agent replaced `history` by `[summary, *history[-kept:]]`: one record saying so, with the summary.

        The lines before it stay (the full record); a reader for the model starts over from it.
        """
        self.sync(history)
        record = b'{"kind":"compacted","kept":%d,"summary":%s}' % (kept, dump_message(summary))
        self._file.write(record + b"\n")
        self._file.flush()
        self._durable.request()
        self._saved = [summary, *self._saved[len(self._saved) - kept:]] if kept else [summary]

    def close(self) -> None:
        self._durable.close()


def _drop_torn_line(path: Path) -> None:
    """Cut a partial last line (a writer killed mid-line) off the file, so appending starts on a line of its own.

    The partial line cannot be read anyway; left in place, the next record would be glued to it and lost.
    """
    try:
        handle = path.open("r+b")
    except FileNotFoundError:
        return
    with handle:
        end = handle.seek(0, os.SEEK_END)
        position = end
        while position > 0:
            start = max(0, position - 4096)
            handle.seek(start)
            block = handle.read(position - start)
            newline = block.rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            position = start
        else:
            keep = 0
        if keep < end:
            handle.truncate(keep)


def read_messages(path: Path, *, record: bool = False) -> list[ModelMessage]:
    """Replay a transcript file into the history it records; unreadable lines are skipped with a warning.

    A compaction starts the history over from its summary request (what the agent sends the model);
    with `record=True` the messages it replaced stay, and its summary request (its `metadata` has
    `compaction`) stands between them and the rounds it kept: the full record, for showing.
    """
    from pydantic import ValidationError

    data = path.read_bytes() if path.exists() else b""
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    elif raw_lines:  # no newline at the end: the process died while writing the last line
        tail = raw_lines.pop()
        warnings.warn(
            f"{path}: skipped a partial last line ({len(tail)} bytes), written when the session ended",
            TranscriptWarning,
            stacklevel=2,
        )
    messages: list[ModelMessage] = []
    batch: list[bytes] = []

    def flush_batch() -> None:
        if not batch:
            return
        try:
            messages.extend(_adapter().validate_json(b"[" + b",".join(batch) + b"]"))
        except ValidationError:  # find the bad lines one by one
            for number, line in batch_numbers:
                try:
                    messages.extend(_adapter().validate_json(b"[" + line + b"]"))
                except ValidationError:
                    warnings.warn(f"{path}: skipped line {number}, which is not a message", TranscriptWarning,
                                  stacklevel=3)
        batch.clear()
        batch_numbers.clear()

    batch_numbers: list[tuple[int, bytes]] = []
    base = 0  # with `record`: where the history the model has starts in the full record
    for number, line in enumerate(raw_lines, start=1):
        if not line.strip():
            continue
        if line.startswith((_TRUNCATE, _COMPACTED)):
            flush_batch()
            try:
                control = json.loads(line)
                if control["kind"] == "compacted":
                    kept = int(control["kept"])
                    summary = _adapter().validate_python([control["summary"]])[0]
                else:
                    keep = int(control["keep"])
            except (ValueError, KeyError, TypeError, ValidationError):
                warnings.warn(f"{path}: skipped line {number}, a broken control record", TranscriptWarning,
                              stacklevel=2)
                continue
            if control["kind"] == "truncate":
                del messages[base + keep:]
            elif record:
                at = max(base, len(messages) - kept)
                messages.insert(at, summary)
                base = at
            else:
                messages[:] = [summary, *messages[len(messages) - kept:]] if kept else [summary]
            continue
        batch.append(line)
        batch_numbers.append((number, line))
    flush_batch()
    return messages


def valid_for_model(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """The history with every tool call answered, ready for the next model request.

    A crash between a model response and its tool results leaves calls without results: each
    gets an "interrupted" result. Results whose call is missing (a skipped corrupted line) are
    dropped, and requests that follow each other are joined, as the agent itself does.
    """
    from pydantic_ai.messages import ModelRequest, ModelResponse, RetryPromptPart, ToolReturnPart

    result: list[ModelMessage] = []
    open_calls: dict[str, str] = {}  # id -> tool name, calls of the last response still without a result
    for message in messages:
        if isinstance(message, ModelResponse):
            if open_calls:
                result.append(_answers(open_calls))
            result.append(message)
            open_calls = {p.tool_call_id: p.tool_name for p in message.parts if p.part_kind == "tool-call"}
            continue
        parts = []
        for part in message.parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id:
                if part.tool_call_id not in open_calls:
                    continue
                open_calls.pop(part.tool_call_id)
            parts.append(part)
        if open_calls and not any(isinstance(p, ToolReturnPart | RetryPromptPart) for p in parts):
            parts = [*_answers(open_calls).parts, *parts]
            open_calls = {}
        elif open_calls:
            parts = [*parts[: _last_result(parts) + 1], *_answers(open_calls).parts, *parts[_last_result(parts) + 1:]]
            open_calls = {}
        if not parts:
            continue
        if result and isinstance(result[-1], ModelRequest):
            result[-1] = ModelRequest(parts=[*result[-1].parts, *parts])
        elif len(parts) == len(message.parts) and all(a is b for a, b in zip(parts, message.parts, strict=True)):
            result.append(message)  # unchanged: the same object, so a writer continuing this history sees no change
        else:
            result.append(ModelRequest(parts=parts))
    if open_calls:
        result.append(_answers(open_calls))
    return result


def _last_result(parts: list[Any]) -> int:
    from pydantic_ai.messages import RetryPromptPart, ToolReturnPart

    return max(i for i, p in enumerate(parts) if isinstance(p, ToolReturnPart | RetryPromptPart))


def _answers(open_calls: dict[str, str]) -> Any:
    from pydantic_ai.messages import ModelRequest, ToolReturnPart

    return ModelRequest(
        parts=[ToolReturnPart(tool_name=name, content=INTERRUPTED_RESULT, tool_call_id=call_id)
               for call_id, name in open_calls.items()]
    )
