"""The one cell reader of every kernel backend: read a cell's messages until it ends, stop it if cancelled.

A backend sends the cell's `execute_request` and hands the reader the request's id and its
`CellHooks`: how it receives messages, asks whether the kernel lives, interrupts, restarts and
recovers. The reader reads the cell's output until the iopub `status: idle` of that request (the
shell's `execute_reply` may come before the last output), interrupts a cell past its timeout and
restarts a kernel that does not stop, turns a death into the result's status and notice, and,
when its caller is cancelled, stops the running cell before the cancellation goes on (however
often it is cancelled meanwhile): a clean-up left running would swallow the next cell's messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cell_run import INTERRUPT_GRACE, STUCK_NOTICE, CellClock, CellOutput, render_output
from .cells import Cell, ExecutionResult, ExecutionStatus
from .messages import MAX_MESSAGE_BYTES, Message, checked, is_output, malformed_notice

__all__ = ["BATCH", "POLL", "CellHooks", "KernelLost", "Message", "read_cell"]

log = logging.getLogger(__name__)
"""Why a kernel was restarted (its state is lost then): a warning for a program's (or a test run's) logging. Not
printed where nobody configured logging: the terminal and the notebook say so in the cell's own notice."""
log.addHandler(logging.NullHandler())

POLL = 0.5
"""Seconds the reader waits for a message before it looks at the clock (and perhaps at the kernel) again."""

BATCH = 1000
"""At most this many messages are received together (their text passed on as one piece)."""


class KernelLost(Exception):
    """The kernel died, or the way to it broke, while a cell ran (`state`: `restarting`, `dead` or `closed`)."""

    def __init__(self, state: str) -> None:
        super().__init__(state)
        self.state = state


def _never(kind: str, content: dict[str, Any]) -> bool:
    return False


async def _no_reconnect(lost: KernelLost) -> str | None:
    return None


def _never_quiet(request: str) -> bool:
    return False


def _no_closing(text: str, status: ExecutionStatus) -> str:
    return ""


@dataclass(frozen=True, kw_only=True)
class CellHooks:
    """What one backend does for the reader of its cells."""

    receive: Callable[[float], Awaitable[list[Message | None]]]
    """The next message (waiting up to the given seconds) and those already queued behind it, from iopub and shell
    (None for one that could not be decoded); raises `TimeoutError` if none came, `KernelLost` if the kernel or the
    way to it is gone. Each is checked by the reader (`messages.checked`): the kernel may have forged it."""
    state: Callable[[], Awaitable[str | None]]
    """The kernel's execution state when no message came: None or `dead`: gone; `idle` twice in a row: the
    cell's end was lost on the way; anything else: read on."""
    check_every: float
    """Seconds between two `state()` looks while nothing arrives (0: at every silence)."""
    interrupt: Callable[[], Awaitable[None]]
    """Interrupt the running cell."""
    restart: Callable[[], Awaitable[None]]
    """Restart a kernel whose cell did not stop after an interrupt."""
    recover: Callable[[KernelLost, bool], Awaitable[str]]
    """After `KernelLost` (and whether the cell was seen running): a kernel again, and the notice that says so."""
    save_png: Callable[[str], Path]
    """Save base64 PNG data on this machine; the file's path."""
    reconnect: Callable[[KernelLost], Awaitable[str | None]] = _no_reconnect
    """After `KernelLost`: a notice if only the connection broke and reading goes on over a new one, else None."""
    resync: Callable[[], Awaitable[None]] | None = None
    """After a reply whose idle never came: make the way to the kernel anew (a message over the size bound ends the
    connection for good)."""
    replies: bool = False
    """Whether `receive` passes on the shell's `execute_reply` too: then a cell ends only at its reply and its idle."""
    drops_output: Callable[[str, dict[str, Any]], bool] = _never
    """Whether a message (kind, content) says output was dropped on the way; it is not shown itself."""
    dropped_notice: str = ""
    """What the cell's output ends with when output was dropped."""
    lost_end_notice: str = ""
    """What the cell's output ends with when `state()` said `idle` twice while its end never came."""
    closing: Callable[[str, ExecutionStatus], str] = _no_closing
    """A last word after the cell's output, given its text and status (the sandbox's limits it met); "": none."""
    quiet: Callable[[str], bool] = _never_quiet
    """Whether output of another request (by id) is the host's own set-up, not shown; other requests' output is shown
    as late output (a thread of an earlier cell, or a cell that announced its own end too early)."""


async def read_cell(hooks: CellHooks, request: str, cell: Cell, notice: str = "") -> ExecutionResult:
    """The result of the cell whose `execute_request` has id `request`; its output starts with `notice`."""
    result = ExecutionResult(text="")
    output = CellOutput(cell.on_output)
    await output.emit(notice)
    try:
        await _read(hooks, request, CellClock(cell.timeout, cell.paused), output, result)
        await output.emit(hooks.closing(output.text, result.status))
        await output.finish()
    except asyncio.CancelledError:
        # The cell must be stopped before the caller goes on (a kernel's lock is released), however often we are
        # cancelled meanwhile: a clean-up left running would swallow the next cell's iopub messages.
        cleanup = asyncio.ensure_future(_stop(hooks, request))
        while not cleanup.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(cleanup)
        if not cleanup.cancelled():
            cleanup.exception()  # retrieved; a failed clean-up shows (a restart) on the next use
        raise
    result.text = output.text
    return result


def _ends(message: Message | None, request: str) -> bool:
    """Whether `message` is the `status: idle` of `request`: the cell is over."""
    message = checked(message)
    return (
        message is not None
        and message["parent_header"].get("msg_id") == request
        and message["msg_type"] == "status"
        and message["content"]["execution_state"] == "idle"
    )


LATE_LABEL = "\n[output of an earlier cell, printed after that cell had ended:]\n"
NO_IDLE_NOTICE = (
    "\n[The kernel replied that this cell ended, but its last output message never came: some output was lost "
    f"(the host refuses a message over {MAX_MESSAGE_BYTES // 2**20} MiB and connects to the kernel again).]\n"
)
REPLY_WAIT = 2
"""Silences (of `POLL` seconds) after the kernel's reply to a cell before its lost `idle` is no longer waited for."""


async def _read(hooks: CellHooks, request: str, clock: CellClock, output: CellOutput, result: ExecutionResult) -> None:
    running = False  # the kernel said `busy` for this request
    dropped = False
    malformed = 0
    last_check = time.monotonic()
    quiet_idle = 0
    # A cell ends at its `execute_reply` and its `status: idle` both: a kernel can forge either on iopub; the reply is
    # what the kernel's shell sends once the cell's code has returned. A reply whose idle never comes (lost on the way)
    # ends it after `REPLY_WAIT` silences. Output that arrives later still reaches the next cell as late output.
    replied = idle = False
    replied_silences = 0
    try:
        while True:
            now = clock.now()
            if clock.stuck(now):
                log.warning("restarting a kernel: its cell still ran %.0f s after its timeout's interrupt",
                            INTERRUPT_GRACE)
                await hooks.restart()
                await output.emit(STUCK_NOTICE)
                break
            if clock.due(now):
                result.status = "timeout"
                clock.interrupted_at = now
                await hooks.interrupt()
                continue
            try:
                batch = await hooks.receive(clock.wait(now, POLL))
            except KernelLost as lost:
                gap = await hooks.reconnect(lost)
                if gap is None:
                    raise
                await output.emit(gap)  # only the connection broke (the kernel runs on): read on over a new one
                continue
            except TimeoutError:
                if replied:
                    replied_silences += 1
                    if replied_silences >= REPLY_WAIT:
                        if hooks.resync is not None:
                            await hooks.resync()
                        await output.emit(NO_IDLE_NOTICE)
                        break
                if now - last_check >= hooks.check_every:
                    last_check = now
                    state = await hooks.state()
                    if state in (None, "dead"):  # gone (culled, deleted) or dead
                        raise KernelLost("dead") from None
                    # idle by the kernel's own account twice in a row while we heard nothing: the connection lost
                    # the end of the cell; waiting longer would wait forever
                    quiet_idle = quiet_idle + 1 if state == "idle" else 0
                    if quiet_idle >= 2:
                        await output.emit(hooks.lost_end_notice)
                        break
                continue
            quiet_idle = replied_silences = 0
            # Output that arrives together is passed on as one piece: fewer, larger chunks.
            texts: list[str] = []
            late = False
            for raw in batch:
                message = checked(raw)
                if message is None:
                    malformed += 1
                    continue
                kind, content = message["msg_type"], message["content"]
                parent = message["parent_header"].get("msg_id")
                if parent != request:
                    if is_output(kind) and not (parent and hooks.quiet(parent)):
                        if not late:
                            texts.append(LATE_LABEL)
                        late = True
                        texts.append(render_output(kind, content, result, hooks.save_png))
                    continue
                if late:
                    texts.append("\n")
                    late = False
                if kind == "execute_reply":
                    replied = True
                    continue
                if kind == "status":
                    state = content["execution_state"]
                    running = running or state == "busy"
                    idle = idle or state == "idle"
                    continue
                if kind == "error" and result.status == "ok":
                    result.status = "error"
                if hooks.drops_output(kind, content):
                    dropped = True
                    continue
                texts.append(render_output(kind, content, result, hooks.save_png))
            await output.emit("".join(texts))
            if idle and (replied or not hooks.replies):
                break
        if dropped:
            await output.emit(hooks.dropped_notice)
        if malformed:
            await output.emit(malformed_notice(malformed))
        if result.status == "timeout":
            await output.emit(clock.timeout_notice())
    except KernelLost as lost:
        # A cell is never sent twice: the backend's notice says whether it may not have run.
        result.status = "kernel_died"
        await output.emit(await hooks.recover(lost, running))


async def _stop(hooks: CellHooks, request: str) -> None:
    """After a cancellation: interrupt, then wait briefly for the cell's idle status; restart if it stays busy."""
    await hooks.interrupt()
    began = time.monotonic()
    deadline = began + INTERRUPT_GRACE
    heard = 0  # messages of any kind since the interrupt, for the warning below
    state: str | None = "alive"
    try:
        while (now := time.monotonic()) < deadline:
            try:
                batch = await hooks.receive(POLL)
            except TimeoutError:
                # `check_every` counts from the interrupt: a backend that looks at every silence (local) finds a
                # dead kernel here; one that looks less often than the grace lasts (the gateway) waits it out
                if now - began >= hooks.check_every and (state := await hooks.state()) in (None, "dead"):
                    break
                continue
            heard += len(batch)
            if any(_ends(message, request) for message in batch):
                return
    except KernelLost as lost:
        log.warning("restarting a kernel: it was lost (%s) while its cancelled cell was interrupted", lost.state)
        await hooks.recover(lost, True)
        return
    log.warning("restarting a kernel: its cancelled cell had not ended %.1f s after the interrupt "
                "(kernel %s, %d messages since)", time.monotonic() - began, state or "gone", heard)
    await hooks.restart()
