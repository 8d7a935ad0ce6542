"""What every kernel backend does alike while one cell runs: render its output, pass it on, keep its clock.

`Kernel` (local) and `GatewayKernel` receive their messages differently, but a message's text
(and image) is rendered the same way, the text is collected and handed to the caller's callback
the same way, and a cell's timeout, the time that does not count (approval waits) and the grace
after an interrupt follow the same rules; so do the words the model reads when a kernel died or
had to be restarted.
"""

from __future__ import annotations

import base64
import collections
import os
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..sandbox.safe_files import open_folder, trusted_base, write_new
from .cells import ExecutionResult, OutputCallback

__all__ = [
    "CUT_NOTICE",
    "DEATH_NOTICE",
    "DIED_BEFORE_NOTICE",
    "INTERRUPT_GRACE",
    "STUCK_NOTICE",
    "CellClock",
    "CellOutput",
    "render_output",
    "save_image",
    "strip_ansi",
]

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

INTERRUPT_GRACE = 5.0
"""Seconds an interrupted cell has to stop before its kernel is restarted."""

DEATH_NOTICE = (
    "\nThe kernel died while running this cell and was restarted: all its state (variables, imports, "
    "definitions) was lost.\n"
)
DIED_BEFORE_NOTICE = (
    "The kernel had died since the last cell and was restarted: all its state (variables, "
    "imports, definitions) was lost.\n"
)
STUCK_NOTICE = "\nThe cell did not stop after an interrupt; the kernel was restarted and its state was lost.\n"


KEPT_HEAD = 500_000
"""Characters of a cell's output kept from its start (and shown as they arrive)."""
KEPT_TAIL = 500_000
"""Characters of a cell's output kept from its end (shown when the cell ends); what lies between is counted only."""
LIVE_CUT_NOTICE = (
    "\n[The cell printed more than {head:,} characters: the rest is not shown as it arrives; the last "
    "{tail:,} are kept and shown when the cell ends.]\n"
)
CUT_NOTICE = "\n[... {cut:,} characters of output were cut by the host; only the start and the end are kept ...]\n"


class CellOutput:
    """The text one cell has produced so far, each piece passed on to `on_output` as it arrives.

    Memory stays bounded however much a kernel prints: the first `head` characters are kept and passed
    on as they arrive, then only the last `tail` are kept (passed on by `finish()`) and the rest counted.
    """

    def __init__(self, on_output: OutputCallback | None, *, head: int = KEPT_HEAD, tail: int = KEPT_TAIL) -> None:
        self._on_output = on_output
        self._parts: list[str] = []
        self._head, self._tail_size = head, tail
        self._kept = 0
        self._tail: collections.deque[str] = collections.deque()
        self._tail_chars = 0
        self.cut = 0
        """Characters counted but not kept (between the head and the tail)."""

    async def _pass(self, text: str) -> None:
        if text and self._on_output is not None:
            outcome = self._on_output(text)
            if outcome is not None:
                await outcome

    async def emit(self, text: str) -> None:
        """Keep `text` and hand it to the callback (awaited if it returns an awaitable); past the head, its tail."""
        if not text:
            return
        if self._kept < self._head:
            part = text[: self._head - self._kept]
            self._parts.append(part)
            self._kept += len(part)
            await self._pass(part)
            text = text[len(part) :]
            if not text:
                return
            await self._pass(LIVE_CUT_NOTICE.format(head=self._head, tail=self._tail_size))
        self._tail.append(text)
        self._tail_chars += len(text)
        while self._tail_chars > self._tail_size:
            first = self._tail[0]
            excess = self._tail_chars - self._tail_size
            if len(first) <= excess:
                self._tail.popleft()
                self._tail_chars -= len(first)
                self.cut += len(first)
            else:
                self._tail[0] = first[excess:]
                self._tail_chars -= excess
                self.cut += excess

    async def finish(self) -> None:
        """Pass on what was kept past the head (the cut, said, and the tail): the cell has ended."""
        if self._tail:
            await self._pass(self._cut_notice() + "".join(self._tail))

    def _cut_notice(self) -> str:
        return CUT_NOTICE.format(cut=self.cut) if self.cut else ""

    @property
    def text(self) -> str:
        return "".join(self._parts) + self._cut_notice() + "".join(self._tail)


class CellClock:
    """A cell's timeout, measured in the cell's own time: seconds `paused()` reports do not count."""

    def __init__(self, timeout: float | None, paused: Callable[[], float] | None) -> None:
        self.timeout = timeout
        self._deadline = time.monotonic() + timeout if timeout else None
        self._paused = paused
        self.interrupted_at: float | None = None
        """When the cell was interrupted for running past its timeout (cell time), if it was."""

    def now(self) -> float:
        """Cell time: the monotonic clock moved back by the seconds that do not count."""
        now = time.monotonic()
        if self._deadline is not None and self._paused is not None:
            now -= self._paused()
        return now

    def due(self, now: float) -> bool:
        """The cell ran past its timeout and has not been interrupted for it yet."""
        return self._deadline is not None and self.interrupted_at is None and now >= self._deadline

    def stuck(self, now: float) -> bool:
        """The cell was interrupted more than `INTERRUPT_GRACE` seconds ago and is still running."""
        return self.interrupted_at is not None and now - self.interrupted_at > INTERRUPT_GRACE

    def wait(self, now: float, poll: float) -> float:
        """How long to wait for the next message: `poll`, or less if the timeout comes first."""
        if self._deadline is None or self.interrupted_at is not None:
            return poll
        return max(0.0, min(poll, self._deadline - now))

    def timeout_notice(self) -> str:
        return f"\nExecution timed out after {self.timeout:g} s and was interrupted.\n"


def strip_ansi(text: str) -> str:
    """`text` without ANSI escape sequences (colours, cursor moves, terminal titles)."""
    return _ANSI_ESCAPE.sub("", text)


def render_output(kind: str, content: dict[str, Any], result: ExecutionResult, save_png: Callable[[str], Path]) -> str:
    """The text one iopub message adds to a cell's output; `image/png` data is saved with `save_png`.

    Shared by every kernel backend, so local and gateway kernels report output alike.
    """
    if kind == "stream":
        return strip_ansi(content.get("text", ""))
    if kind == "error":
        return strip_ansi("\n".join(content.get("traceback", []))) + "\n"
    if kind in ("execute_result", "display_data"):
        data = content.get("data", {})
        if "image/png" in data:
            try:
                path = save_png(data["image/png"])
            except (OSError, ValueError) as exc:  # a link planted on the way, a full disk, bad base64
                return f"[image not saved: {exc}]\n"
            result.images.append(path)
            return f"[image saved: {path}]\n"
        text = data.get("text/plain")
        return strip_ansi(text) + "\n" if text else ""
    return ""


def save_image(images_dir: Path, label: str, number: int, encoded: str, *, working_dir: Path | None = None) -> Path:
    """Write base64 PNG data to `<images_dir>/<label>-<number>-<random>.png` and return the path.

    No link on the way is followed below `working_dir` (where a kernel may have written), nor at the file itself.
    """
    base = trusted_base(images_dir, working_dir) if working_dir is not None else Path(images_dir).parent
    name = f"{label}-{number}-{uuid.uuid4().hex[:6]}.png"
    folder = open_folder(base, images_dir)
    try:
        write_new(folder, name, base64.b64decode(encoded))
    finally:
        os.close(folder)
    return images_dir / name
