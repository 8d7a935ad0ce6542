"""`Kernel`: one IPython kernel, driven through `jupyter_client`.

A kernel is a child process of the host, started with its own private connection folder and
`ipc` sockets inside it (so parallel kernels never collide and nothing listens on TCP). It
executes one cell at a time and reports output as it arrives. A cell is complete only at the
iopub `status: idle` for its request; the shell's `execute_reply` may come before the last output.

Failure modes, each leaving the kernel usable:
- a cell past its timeout is interrupted (SIGINT); if it does not stop, the kernel is restarted;
- a kernel that dies (`os._exit`, a segfault) is detected and restarted, and the result says so;
- cancelling `execute()` interrupts the running cell before the cancellation propagates.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import queue
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import zmq
import zmq.asyncio
from jupyter_client import AsyncKernelClient, AsyncKernelManager
from jupyter_client.connect import channel_socket_types
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

from ..errors import KernelError
from ..sandbox import kernel_folders
from ..sandbox.safe_files import open_folder, trusted_base, write_new
from .cell_run import (
    DEATH_NOTICE,
    DIED_BEFORE_NOTICE,
    INTERRUPT_GRACE,
    STUCK_NOTICE,
    CellClock,
    CellOutput,
    OutputCallback,
)
from .launcher import KERNEL_LAUNCHER, ForkedProvisioner, KernelZygote, kernel_environment

__all__ = ["ExecutionResult", "Kernel", "KernelError", "kernel_environment", "render_output", "save_image"]

ExecutionStatus = Literal["ok", "error", "timeout", "kernel_died"]

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_RECONNECT_INTERVAL_MS = 10
_LIVENESS_POLL = 0.5
_STARTUP_TIMEOUT = 60.0
_KILL_POLL = 0.002
"""Seconds between looks at a killed kernel: is it gone yet?"""
_KILL_WAIT = 5.0
_KERNEL_WRITES = ("run", "tmp", "ipython")
"""The kernel's own folders that it may write (sockets, temp files, IPython's folder), inside its private one."""
_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
TOOLS_SOCKET_VARIABLE = "FREEACT_SUB_TOOLS_SOCKET"
"""Where a kernel binds the listening socket of its code-tools channel before any of its code runs."""


@dataclass
class ExecutionResult:
    """The outcome of one cell."""

    text: str
    """All text output in arrival order, ANSI escapes removed."""
    images: list[Path] = field(default_factory=list)
    """Files the cell's `image/png` outputs were saved to."""
    status: ExecutionStatus = "ok"
    kernel_wait: float = 0.0
    """Seconds before the cell started that went to waiting for the kernel itself (a subagent's first cell,
    while its kernel boots: `PendingKernel`)."""


def strip_ansi(text: str) -> str:
    return _ANSI_ESCAPE.sub("", text)


def render_output(
    kind: str, content: dict[str, Any], result: ExecutionResult, save_png: Callable[[str], Path]
) -> str:
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


KERNEL_OPTIONS = ["--HistoryManager.hist_file=:memory:"]
"""IPython's input history stays in the kernel's memory (`In`, `%history` work as ever): no kernel writes the
user's `~/.ipython` history database, and a kernel's start does not wait for a commit to it (a third of a
forked kernel's start, and a lock every kernel of a fan-out takes in turn)."""


class _HostPythonSpecs(KernelSpecManager):
    """Kernel specs that always run our ipykernel launcher (`_ipykernel_launcher`) in the host's own Python."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        argv = [sys.executable, KERNEL_LAUNCHER, "-f", "{connection_file}", *KERNEL_OPTIONS]
        return KernelSpec(argv=argv, display_name="Python 3 (freeact-sub)", language="python")


_shared_context: tuple[int, zmq.asyncio.Context] | None = None


def _zmq_context() -> zmq.asyncio.Context:
    """This process's one ZeroMQ context, for every kernel's manager and client.

    jupyter_client gives each manager and each client a context of its own: two I/O threads started and joined
    per kernel, a sixth of the host's CPU for a subagent's kernel. A context is thread-safe and holds no
    kernel's state (sockets do); a forked copy of this process makes its own.
    """
    global _shared_context
    if _shared_context is None or _shared_context[0] != os.getpid():
        context = zmq.asyncio.Context()
        # ZeroMQ's default of 1023 sockets a context would now bound the whole process (3 a kernel: ~340 kernels)
        context.set(zmq.MAX_SOCKETS, 8192)
        _shared_context = (os.getpid(), context)
    return _shared_context[1]


class _KernelClient(AsyncKernelClient):
    """A kernel client whose sockets suit a kernel that is just starting and may print a lot.

    - The iopub socket never drops output. ZeroMQ's default receive high-water mark (1000
      messages) lets a kernel that prints faster than we read (e.g. 10,000
      `print(..., flush=True)`) lose messages: the kernel's publisher drops what the
      subscriber cannot queue. An unlimited receive queue keeps every message; the kernel's
      own publisher has an unlimited send queue too (`_ipykernel_launcher`), for when this
      process is too starved of CPU to read at all.
    - Sockets retry a connection every 10 ms instead of ZeroMQ's 100 ms: we connect while the
      kernel is still binding its sockets, and each missed retry is start-up time lost.
    """

    def _create_connected_socket(self, channel: str, identity: bytes | None = None) -> zmq.Socket:
        socket = self.context.socket(channel_socket_types[channel])
        socket.linger = 1000
        socket.reconnect_ivl = _RECONNECT_INTERVAL_MS
        if channel == "iopub":
            socket.rcvhwm = 0
        if identity:
            socket.identity = identity
        socket.connect(self._make_url(channel))
        return socket


async def _answer_arrives(request: str, receive: Callable[..., Any], until: float) -> bool:
    """Whether a message whose parent is `request` arrives through `receive` before `until`; others are dropped."""
    while (left := until - time.monotonic()) > 0:
        try:
            message = await receive(timeout=left)
        except queue.Empty:
            return False
        if message["parent_header"].get("msg_id") == request:
            return True
    return False


class Kernel:
    """One IPython kernel. Use `async with Kernel(...)` or `start()` / `shutdown()`."""

    def __init__(
        self,
        *,
        working_dir: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        images_dir: str | Path | None = None,
        label: str = "kernel",
        launcher: KernelZygote | None = None,
        sandbox: Mapping[str, Any] | Callable[..., Mapping[str, Any]] | None = None,
    ) -> None:
        self.working_dir = Path(working_dir or Path.cwd())
        self.images_dir = Path(images_dir) if images_dir else self.working_dir / ".freeact-sub" / "images"
        self.label = label
        """Prefix of saved image files; the agent sets its id here."""
        self._env = kernel_environment(env)
        self._manager: AsyncKernelManager | None = None
        self._client: Any = None
        self._connection_dir: str | None = None
        self._lock = asyncio.Lock()
        self._image_count = 0
        self._launcher = launcher
        self._log_file: IO[bytes] | None = None
        self.restarts = 0
        """How often the kernel was restarted (after a death, a stuck interrupt or `reset()`)."""
        self._startup_code: list[str] = []
        """Set-up run at the start of every kernel process, before any cell (`run_at_start`)."""
        self._unsent_startup: list[str] = []
        """Set-up to send just before the next cell (`run_at_start(wait=False)`)."""
        self._sandbox = sandbox
        """The sandbox plan (`freeact_sub.sandbox.enforce`) the kernel process is confined to, or a function that
        makes it anew for each start and restart (so a secret made since is covered); None: no sandbox."""

    async def __aenter__(self) -> Kernel:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    @property
    def pid(self) -> int | None:
        """PID of the kernel process, if it runs."""
        manager = self._manager
        provisioner = getattr(manager, "provisioner", None) if manager else None
        process = getattr(provisioner, "process", None)
        return getattr(process, "pid", None)

    @property
    def started(self) -> bool:
        return self._manager is not None

    async def start(self, timeout: float = 60.0) -> None:
        """Start the kernel and wait until it answers."""
        if self._manager is not None:
            return
        self._connection_dir = kernel_folders.create()
        for own in _KERNEL_WRITES:  # the kernel writes only in these; its folder (log, key, owner) is the host's
            os.mkdir(os.path.join(self._connection_dir, own), 0o700)
        self._env[TOOLS_SOCKET_VARIABLE] = os.path.join(self._connection_dir, "run", "tools.sock")
        manager = AsyncKernelManager(
            kernel_name="python3",
            kernel_spec_manager=_HostPythonSpecs(),
            transport="ipc",
            ip=os.path.join(self._connection_dir, "run", "socket"),
            connection_file=os.path.join(self._connection_dir, "connection.json"),
        )
        manager.context = _zmq_context()
        manager.shutdown_wait_time = 2.0
        manager.client_factory = _KernelClient
        manager.kernel_id = uuid.uuid4().hex
        provisioner = ForkedProvisioner(kernel_id=manager.kernel_id, kernel_spec=manager.kernel_spec, parent=manager)
        provisioner.zygote = self._launcher
        provisioner.log_path = self._log_path
        if self._sandbox is not None:
            self._sandbox_environment()
            provisioner.plan_source = self._confined_plan  # made anew at each start and restart
        manager.provisioner = provisioner
        self._manager = manager
        try:
            self.working_dir.mkdir(parents=True, exist_ok=True)
            await self._launch()
            await self._connect(timeout)
        except BaseException as exc:
            details = "" if isinstance(exc, KernelError) else self._log_details()
            await self.shutdown(now=True)  # it never ran anything: no state to end gracefully
            if isinstance(exc, Exception):
                raise KernelError(f"the IPython kernel did not start: {exc}{details}") from exc
            raise

    @property
    def tools_socket(self) -> str | None:
        """Where the kernel listens for its agent's code-tools channel (`code_tools.channel`); None: not started."""
        if self._connection_dir is None:
            return None
        return os.path.join(self._connection_dir, "run", "tools.sock")

    def _sandbox_environment(self) -> None:
        """Temp files, IPython's folder and caches in the kernel's own folders (the rest is not writable)."""
        assert self._connection_dir is not None
        temp = os.path.join(self._connection_dir, "tmp")
        for name in ("TMPDIR", "TEMP", "TMP"):
            self._env[name] = temp
        # a private IPython folder (unless kernel_env names one): ~/.ipython is not writable in a sandbox
        self._env.setdefault("IPYTHONDIR", os.path.join(self._connection_dir, "ipython"))
        self._env.setdefault("MPLCONFIGDIR", os.path.join(temp, "matplotlib"))
        self._env.setdefault("XDG_CACHE_HOME", os.path.join(temp, "cache"))

    def _confined_plan(self) -> dict[str, Any]:
        """The sandbox plan of this (re)start: the kernel's own folders writable, no other kernel's visible."""
        assert self._sandbox is not None and self._connection_dir is not None
        own = self._connection_dir
        # a restart looks again: a secret made since the last start is covered from now on
        plan = dict(self._sandbox(fresh=self.restarts > 0) if callable(self._sandbox) else self._sandbox)
        writes = [os.path.join(own, folder) for folder in _KERNEL_WRITES]
        return {**plan, "write": [*plan.get("write", ()), *writes], "scratch": own,
                "private_root": os.path.dirname(own), "own": [own]}

    @property
    def _log_path(self) -> str:
        assert self._connection_dir is not None
        return os.path.join(self._connection_dir, "kernel.log")

    async def _launch(self) -> None:
        """Start the kernel process: forked by the zygote if there is one, else launched anew."""
        assert self._manager is not None
        if self._log_file is None or self._log_file.closed:
            # The kernel's stderr goes here, not to the host's terminal; restarts reuse the open file. The folder is
            # the host's (the kernel cannot swap the log for a link), and no link is followed all the same.
            self._log_file = os.fdopen(os.open(self._log_path, _LOG_FLAGS, 0o600), "ab")
        await self._manager.start_kernel(
            env=dict(self._env), cwd=str(self.working_dir), stdout=subprocess.DEVNULL, stderr=self._log_file
        )

    def _log_tail(self, lines: int = 15) -> str:
        try:
            with open(self._log_path, encoding="utf-8", errors="replace") as log:
                return "\n".join(log.read().strip().splitlines()[-lines:])
        except (OSError, AssertionError):
            return ""

    async def _connect(self, timeout: float) -> None:
        assert self._manager is not None
        if self._client is not None:
            self._client.stop_channels()
        client = self._manager.client(context=_zmq_context())
        # shell and iopub only: cells never read stdin (`allow_stdin=False`), liveness is the process's (no
        # heartbeat thread), and interrupts and shutdowns go through the manager
        client.start_channels(stdin=False, hb=False, control=False)
        self._client = client
        await self._wait_until_ready(timeout)

    async def _wait_until_ready(self, timeout: float) -> None:
        """Wait until the kernel answers `kernel_info` and its iopub messages reach us.

        Like `wait_for_ready` of jupyter_client, but it watches iopub for the status messages of
        its own request instead of sleeping for a fixed time: a kernel is usable the moment both
        channels work.
        """
        client = self._client
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            request = client.kernel_info()
            round_end = min(deadline, time.monotonic() + 1.0)
            # the reply first, then iopub: the status messages wait in the iopub socket meanwhile (a wait on both
            # at once polled iopub every 10 ms while the kernel booted, ~15 % of the host's CPU for a kernel)
            if await _answer_arrives(request, client.get_shell_msg, round_end) and await _answer_arrives(
                request, client.get_iopub_msg, round_end
            ):
                return
            if not await self.is_alive():
                raise KernelError(f"the kernel died while starting{self._log_details()}")
        raise KernelError(f"the kernel did not answer within {timeout:g} s{self._log_details()}")

    def _log_details(self) -> str:
        log = self._log_tail()
        return f"\nkernel log:\n{log}" if log else ""

    async def is_alive(self) -> bool:
        return self._manager is not None and bool(await self._manager.is_alive())

    async def execute(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        paused: Callable[[], float] | None = None,
        store_history: bool = True,
    ) -> ExecutionResult:
        """Run `code` as one cell; `on_output` gets each piece of text output as it arrives.

        Cells on one kernel run one after another. A cell that runs past `timeout` seconds is
        interrupted and reported with status `timeout`; `paused()`, if given, says how many of
        the cell's seconds so far do not count (e.g. its MCP calls waiting for approval).
        `store_history=False` keeps the code out of IPython's history and execution count.
        """
        async with self._lock:
            if self._manager is None:
                raise KernelError("the kernel is not running")
            notice = ""
            if not await self.is_alive():
                await self._restart()
                notice = DIED_BEFORE_NOTICE
            return await self._execute(code, timeout, on_output, notice, paused, store_history)

    async def _execute(
        self,
        code: str,
        timeout: float | None,
        on_output: OutputCallback | None,
        notice: str = "",
        paused: Callable[[], float] | None = None,
        store_history: bool = True,
    ) -> ExecutionResult:
        client = self._client
        for startup in self._unsent_startup:  # its messages are not this cell's: they are passed over below
            client.execute(startup, silent=True, store_history=False, allow_stdin=False)
        self._unsent_startup.clear()
        msg_id = client.execute(code, store_history=store_history, allow_stdin=False)
        result = ExecutionResult(text="")
        output = CellOutput(on_output)
        await output.emit(notice)
        clock = CellClock(timeout, paused)
        try:
            while True:
                now = clock.now()
                if clock.stuck(now):
                    await self._restart()
                    await output.emit(STUCK_NOTICE)
                    break
                if clock.due(now):
                    result.status = "timeout"
                    clock.interrupted_at = now
                    await self.interrupt()
                    continue
                try:
                    batch = await self._receive_batch(clock.wait(now, _LIVENESS_POLL))
                except queue.Empty:
                    if not await self.is_alive():
                        result.status = "kernel_died"
                        await self._restart()
                        await output.emit(DEATH_NOTICE)
                        break
                    continue
                # Output that arrives together is passed on as one piece: fewer, larger chunks.
                texts: list[str] = []
                finished = False
                for msg in batch:
                    if msg.get("parent_header", {}).get("msg_id") != msg_id:
                        continue
                    kind, content = msg["msg_type"], msg["content"]
                    if kind == "status" and content.get("execution_state") == "idle":
                        finished = True
                        break
                    if kind == "error" and result.status == "ok":
                        result.status = "error"
                    texts.append(self._render(kind, content, result))
                await output.emit("".join(texts))
                if finished:
                    break
            if result.status == "timeout":
                await output.emit(clock.timeout_notice())
        except asyncio.CancelledError:
            # The cell must be stopped before the lock is released, however often we are cancelled
            # meanwhile: a cleanup left running would swallow the next cell's iopub messages.
            cleanup = asyncio.ensure_future(self._stop_running_cell(msg_id))
            while not cleanup.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(cleanup)
            if not cleanup.cancelled():
                cleanup.exception()  # retrieved; a failed cleanup is followed by a restart on next use
            raise
        finally:
            await self._drain_shell()
        result.text = output.text
        return result

    async def _receive_batch(self, wait: float) -> list[dict[str, Any]]:
        """The next iopub message (waiting up to `wait` s) and every message already queued behind it."""
        client = self._client
        batch = [await client.get_iopub_msg(timeout=wait)]
        if batch[0]["msg_type"] != "stream":  # only printing comes in floods
            return batch
        while len(batch) < 1000:
            try:
                batch.append(await client.get_iopub_msg(timeout=0))
            except queue.Empty:
                break
        return batch

    def _render(self, kind: str, content: dict[str, Any], result: ExecutionResult) -> str:
        return render_output(kind, content, result, self._save_image)

    def _save_image(self, encoded: str) -> Path:
        self._image_count += 1
        return save_image(self.images_dir, self.label, self._image_count, encoded, working_dir=self.working_dir)

    async def _stop_running_cell(self, msg_id: str) -> None:
        """After a cancellation: interrupt, then wait briefly for the cell's idle status."""
        await self.interrupt()
        deadline = time.monotonic() + INTERRUPT_GRACE
        while time.monotonic() < deadline:
            try:
                msg = await self._client.get_iopub_msg(timeout=_LIVENESS_POLL)
            except queue.Empty:
                if not await self.is_alive():
                    break
                continue
            if (
                msg.get("parent_header", {}).get("msg_id") == msg_id
                and msg["msg_type"] == "status"
                and msg["content"].get("execution_state") == "idle"
            ):
                return
        await self._restart()

    async def _drain_shell(self) -> None:
        # execute_reply messages are not needed (iopub carries everything); drop them so they do not pile up.
        client = self._client
        if client is None:
            return
        with contextlib.suppress(Exception):
            while await client.shell_channel.msg_ready():
                await client.shell_channel.get_msg(timeout=0)

    async def interrupt(self) -> None:
        """Send an interrupt (SIGINT) to the running cell."""
        if self._manager is not None:
            with contextlib.suppress(Exception):
                await self._manager.interrupt_kernel()

    async def reset(self) -> None:
        """Restart the kernel with a clean state (waits for a running cell's lock)."""
        async with self._lock:
            await self._restart()

    async def _restart(self) -> None:
        assert self._manager is not None
        self.restarts += 1
        if await self.is_alive():
            await self._manager.restart_kernel(now=True)
        else:
            await self._launch()
        await self._connect(timeout=60.0)
        self._unsent_startup.clear()  # run below, on the new process
        for code in self._startup_code:
            await self._execute(code, _STARTUP_TIMEOUT, None, store_history=False)

    async def run_at_start(self, code: str, *, wait: bool = True) -> None:
        """Run `code` now and again after every restart, before any other cell (not stored in the history).

        For set-up the agent needs in its kernel, such as connecting it to its MCP tools. With
        `wait=False` it is sent together with the next cell instead, just before it: the kernel runs
        requests in order, so the cell still finds it done, and no round trip is spent on it alone.
        """
        async with self._lock:
            if self._manager is None:
                raise KernelError("the kernel is not running")
            self._startup_code.append(code)
            if wait:
                await self._execute(code, _STARTUP_TIMEOUT, None, store_history=False)
            else:
                self._unsent_startup.append(code)

    async def shutdown(self, *, now: bool = False) -> None:
        """Stop the kernel: a shutdown request first, SIGKILL if it does not exit in time.

        With `now=True` the kernel is killed at once (for throwaway kernels whose state nobody needs).
        """
        manager, self._manager = self._manager, None
        client, self._client = self._client, None
        try:
            if client is not None:
                client.stop_channels()
            if manager is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._stop_process(manager, now))
        finally:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None
            if self._connection_dir is not None:
                folder, self._connection_dir = self._connection_dir, None
                # in a thread: on a busy disk removing a folder takes milliseconds the event loop (every other
                # agent's events, a fan-out's next child) should not wait for
                await asyncio.shield(asyncio.to_thread(kernel_folders.remove, folder))

    @staticmethod
    async def _stop_process(manager: AsyncKernelManager, now: bool) -> None:
        provisioner = manager.provisioner
        if now and manager.has_kernel and provisioner is not None:
            # What `shutdown_kernel(now=True)` does, without its waits: jupyter_client looks for the killed
            # process every 0.1 s and then sleeps 10 ms more, where a killed kernel is gone in a few ms (a
            # child's kernel is killed as its agent ends: its parent waits on this).
            await provisioner.kill()
            deadline = time.monotonic() + _KILL_WAIT
            while await provisioner.poll() is None and time.monotonic() < deadline:  # noqa: ASYNC110 - a process
                await asyncio.sleep(_KILL_POLL)
            if await provisioner.poll() is not None:
                await provisioner.wait()
                await manager.cleanup_resources()
                return
        if manager.has_kernel:
            await manager.shutdown_kernel(now=now)
