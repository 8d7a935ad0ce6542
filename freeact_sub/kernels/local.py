"""`Kernel`: one IPython kernel, driven through `jupyter_client`.

A kernel is a child process of the host, started with its own private connection folder and
`ipc` sockets inside it (so parallel kernels never collide and nothing listens on TCP). It
executes one cell at a time and reports output as it arrives. A cell is complete only at the
iopub `status: idle` for its request; the shell's `execute_reply` may come before the last output.

Failure modes, each leaving the kernel usable:
- a cell past its timeout is interrupted (SIGINT); if it does not stop, the kernel is restarted;
- a kernel that dies (`os._exit`, a segfault) is detected and restarted, and the result says so;
- cancelling `execute()` interrupts the running cell before the cancellation propagates.

The cell itself is read by `cell_reader` (shared with the gateway backend); the jupyter_client
plumbing (manager, client sockets, folder, log) is `local_manager`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from jupyter_client import AsyncKernelManager

from ..errors import KernelError
from ..sandbox import kernel_folders
from ..sandbox.guard import KernelGuard
from .cell_reader import CellHooks, KernelLost, Message, log, read_cell
from .cell_run import DEATH_NOTICE, DIED_BEFORE_NOTICE, save_image
from .cells import Cell, ExecutionResult, ExecutionStatus, RunsCells
from .launcher import KernelZygote, kernel_environment
from .local_manager import (
    KERNEL_WRITES,
    TOOLS_SOCKET_VARIABLE,
    confined_plan,
    drain_shell,
    log_details,
    new_manager,
    open_log,
    receive_batch,
    sandbox_environment,
    stop_process,
    wait_until_ready,
    zmq_context,
)

__all__ = ["Kernel", "KernelError", "released"]

_STARTUP_TIMEOUT = 60.0

_releasing: set[asyncio.Future[None]] = set()
"""Releases of what killed kernels held (`shutdown(now=True)`) still under way, in worker threads."""


class Kernel(RunsCells):
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
        self._guard: KernelGuard | None = None
        """Its sandbox's hosts and limits (the proxy's way in, a pids cgroup, time per cell), while it runs."""
        self._sandbox = sandbox
        """The sandbox plan (`freeact_sub.sandbox.enforce`) the kernel process is confined to, or a function that
        makes it anew for each start and restart (so a secret made since is covered); None: no sandbox."""

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
        # in a thread: the folder, the sandbox's plan, the proxy's registration and the cgroups are file system
        # work (~1-3 ms, more on a busy disk) that the event loop (a child's model request, say) should not wait
        # for. Nothing of the kernel runs before they exist; a start cancelled meanwhile releases them.
        preparing = asyncio.ensure_future(asyncio.to_thread(self._prepare))
        try:
            await asyncio.shield(preparing)
        except BaseException:
            with contextlib.suppress(BaseException):
                await preparing
            await self.shutdown(now=True)
            raise
        folder = self._connection_dir
        assert folder is not None
        manager = new_manager(
            folder,
            zygote=self._launcher,
            log_path=self._log_path,
            plan_source=self._confined_plan if self._sandbox is not None else None,
        )
        self._manager = manager
        try:
            self.working_dir.mkdir(parents=True, exist_ok=True)
            await self._launch()
            await self._connect_confined(timeout)
        except BaseException as exc:
            details = "" if isinstance(exc, KernelError) else self._log_details()
            await self.shutdown(now=True)  # it never ran anything: no state to end gracefully
            if isinstance(exc, Exception):
                raise KernelError(f"the IPython kernel did not start: {exc}{details}") from exc
            raise

    def _prepare(self) -> None:
        """The kernel's private folder, and under a sandbox its guard (plan, proxy registration, cgroups)."""
        self._connection_dir = folder = kernel_folders.create()
        for own in KERNEL_WRITES:  # the kernel writes only in these; its folder (log, key, owner) is the host's
            os.mkdir(os.path.join(folder, own), 0o700)
        self._env[TOOLS_SOCKET_VARIABLE] = os.path.join(folder, "run", "tools.sock")
        if self._sandbox is not None:
            sandbox_environment(self._env, folder)
            self._guard = KernelGuard(dict(self._sandbox() if callable(self._sandbox) else self._sandbox), folder)
            self._env.update(self._guard.environment())

    @property
    def tools_socket(self) -> str | None:
        """Where the kernel listens for its agent's code-tools channel (`code_tools.channel`); None: not started."""
        if self._connection_dir is None:
            return None
        return os.path.join(self._connection_dir, "run", "tools.sock")

    def _confined_plan(self) -> dict[str, Any]:
        """The sandbox plan of this (re)start: the kernel's own folders writable, no other kernel's visible."""
        assert self._sandbox is not None and self._connection_dir is not None
        # a restart looks again: a secret made since the last start is covered from now on
        plan = self._sandbox(fresh=self.restarts > 0) if callable(self._sandbox) else self._sandbox
        plan = confined_plan(plan, self._connection_dir)
        return self._guard.confine(plan) if self._guard is not None else plan

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
            self._log_file = open_log(self._log_path)
        await self._manager.start_kernel(
            env=dict(self._env), cwd=str(self.working_dir), stdout=subprocess.DEVNULL, stderr=self._log_file
        )

    async def _connect_confined(self, timeout: float) -> None:
        """Connect to the kernel while the host moves it into its cgroup (a sandbox's `processes`)."""
        if self._guard is None:
            await self._connect(timeout)
            return
        await asyncio.gather(self._connect(timeout), self._guard.attach(self.pid))

    async def _connect(self, timeout: float) -> None:
        assert self._manager is not None
        if self._client is not None:
            self._client.stop_channels()
        client = self._manager.client(context=zmq_context())
        # shell and iopub only: cells never read stdin (`allow_stdin=False`), liveness is the process's (no
        # heartbeat thread), and interrupts and shutdowns go through the manager
        client.start_channels(stdin=False, hb=False, control=False)
        self._client = client
        await wait_until_ready(client, timeout, self.is_alive, self._log_path)

    def _log_details(self) -> str:
        return log_details(self._log_path) if self._connection_dir is not None else ""

    async def is_alive(self) -> bool:
        return self._manager is not None and bool(await self._manager.is_alive())

    async def run_cell(self, cell: Cell) -> ExecutionResult:
        """Run one cell; cells on one kernel run one after another (see `RunsCells.execute`)."""
        async with self._lock:
            if self._manager is None:
                raise KernelError("the kernel is not running")
            notice = ""
            if not await self.is_alive():
                log.warning("restarting kernel %s: it had died since its last cell (%s)", self.label, self._exit())
                await self._restart()
                notice = DIED_BEFORE_NOTICE
            return await self._run(cell, notice)

    async def _run(self, cell: Cell, notice: str = "", *, set_up: bool = False) -> ExecutionResult:
        """Run `cell`; a `set_up` cell (`run_at_start`'s) takes no `[sandbox]` notices: what a limit did to the
        kernel belongs to the person's cell that met it, which may be the one that made this restart."""
        client = self._client
        quiet = {  # its messages are not this cell's: the reader passes them over
            client.execute(startup, silent=True, store_history=False, allow_stdin=False)
            for startup in self._unsent_startup
        }
        self._unsent_startup.clear()
        request = client.execute(cell.code, store_history=cell.store_history, allow_stdin=False)
        timed_by_profile = False
        if self._guard is not None:  # the sandbox profile's `cell_time`, where it is the shorter
            timeout, timed_by_profile = self._guard.timeout(cell.timeout)
            cell = dataclasses.replace(cell, timeout=timeout)
        hooks = CellHooks(
            receive=self._receive,
            replies=True,
            resync=functools.partial(self._connect, 10.0),
            quiet=quiet.__contains__,
            state=self._state,
            check_every=0.0,
            interrupt=self.interrupt,
            restart=self._restart,
            recover=self._recover,
            save_png=self._save_image,
            closing=(lambda text, status: "") if set_up else functools.partial(self._sandbox_notices, timed_by_profile),
        )
        try:
            return await read_cell(hooks, request, cell, notice)
        finally:
            await drain_shell(self._client)

    async def _receive(self, wait: float) -> list[Message | None]:
        return await receive_batch(self._client, wait)

    async def _state(self) -> str:
        return "alive" if await self.is_alive() else "dead"

    async def _recover(self, lost: KernelLost, running: bool) -> str:
        """After a death: a restarted kernel (its state lost)."""
        log.warning("restarting kernel %s: it died while a cell ran (%s)", self.label, self._exit())
        await self._restart()
        return DEATH_NOTICE

    def _exit(self) -> str:
        """How the kernel's process ended, for a log line (its exit code, or a signal's name)."""
        provisioner = self._manager.provisioner if self._manager is not None else None
        process = getattr(provisioner, "process", None)
        code = process.poll() if process is not None else None
        if code is None:
            return "its process runs, but does not answer"
        return f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() \
            else f"exit code {code}"

    def _sandbox_notices(self, timed_by_profile: bool, text: str, status: ExecutionStatus) -> str:
        """The `[sandbox]` lines after a cell's output: refused connections, limits it met."""
        lines = self._guard.notices(text, status, timed_by_profile) if self._guard is not None else []
        if not lines:
            return ""
        return ("" if text.endswith("\n") or not text else "\n") + "\n".join(lines) + "\n"

    def _save_image(self, encoded: str) -> Path:
        self._image_count += 1
        return save_image(self.images_dir, self.label, self._image_count, encoded, working_dir=self.working_dir)

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
        await self._connect_confined(timeout=60.0)
        self._unsent_startup.clear()  # run below, on the new process
        for code in self._startup_code:
            await self._run(Cell(code=code, timeout=_STARTUP_TIMEOUT, store_history=False), set_up=True)

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
                await self._run(Cell(code=code, timeout=_STARTUP_TIMEOUT, store_history=False), set_up=True)
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
                    await asyncio.shield(stop_process(manager, now))
        finally:
            guard, self._guard = self._guard, None
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None
            folder, self._connection_dir = self._connection_dir, None
            if guard is not None or folder is not None:
                # in a thread: the proxy's registration waits for the proxy's own thread to close it, the cgroups
                # and the folder are removed from a busy disk: milliseconds the event loop (every other agent's
                # events, a fan-out's next child) should not wait for. The kernel process is gone by now.
                release = asyncio.ensure_future(asyncio.to_thread(_release, guard, folder))
                if now:
                    # a killed kernel's caller (a child's end, which frees its slot; a pool's surplus) does not wait
                    # for it either: under load the thread's turn came 15-90 ms later. `released()` waits for it.
                    _releasing.add(release)
                    release.add_done_callback(_released)
                else:
                    await asyncio.shield(release)


async def released() -> None:
    """Wait until the kernels this event loop killed (`shutdown(now=True)`) have released what they held: their way to
    the sandbox's proxy, their cgroups, their private folders. An agent tree waits for it as it closes."""
    loop = asyncio.get_running_loop()
    while pending := [release for release in _releasing if release.get_loop() is loop]:
        await asyncio.gather(*pending, return_exceptions=True)


def _released(release: asyncio.Future[None]) -> None:
    _releasing.discard(release)
    if not release.cancelled() and (error := release.exception()) is not None:
        log.warning("a killed kernel's folder or sandbox guard was not released: %s", error)


def _release(guard: KernelGuard | None, folder: str | None) -> None:
    """What a kernel held once its process is gone: its way to the proxy and its cgroups, then its folder."""
    try:
        if guard is not None:
            guard.close()
    finally:
        if folder is not None:
            kernel_folders.remove(folder)
