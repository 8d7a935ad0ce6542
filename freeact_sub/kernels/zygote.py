"""The host side of the kernel zygote (`_kernel_zygote`), and the one zygote per host process.

`KernelZygote` starts the zygote process and asks it for kernels. It is bound to no event loop: a
reader thread owns the zygote's stdout and hands each fork's answer to the loop of the coroutine
that asked (`call_soon_threadsafe`), so one zygote serves agents on any number of loops (a test
each, a notebook's, a program's several `asyncio.run`).

`process_zygote()` is the zygote every agent of this process shares, keyed by what a fork cannot
change: the Python it runs and its start-up environment (a forked kernel's `/proc/self/environ`).
It lives until the process ends (closed at exit; if the host dies, the zygote's stdin closes and it
kills its kernels) or `close_process_zygote()`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

__all__ = [
    "ZYGOTE_SCRIPT",
    "ForkedProcess",
    "KernelZygote",
    "close_process_zygote",
    "kernel_environment",
    "process_zygote",
    "process_zygote_pids",
]

ZYGOTE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_kernel_zygote.py")
"""The zygote runs by path: it imports what a kernel needs, not the `freeact_sub` package."""

_START_TIMEOUT = 60.0
_CANCELLED_FORK_WAIT = 5.0
"""Seconds a cancelled fork waits for the zygote's answer, to kill the kernel it names before the cancellation ends."""
_INHERITED_VARIABLES = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR", "LANG", "LANGUAGE")
"""Host variables a kernel may see; anything else (API keys above all) must be named in `kernel_env`."""


def kernel_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a kernel starts with: PATH, HOME, locale and a few basics, plus `extra`.

    Never the rest of the host's (its provider API keys above all): a variable a kernel needs is named in
    `kernel_env`.
    """
    env = {name: os.environ[name] for name in _INHERITED_VARIABLES if name in os.environ}
    env.update({name: value for name, value in os.environ.items() if name.startswith("LC_")})
    env.update(extra or {})
    return env


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rsplit(b")", 1)[1].split()[0]
        return state != b"Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    except OSError:  # no /proc: fall back to a signal-0 probe
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def _kill_group(pid: int) -> None:
    # the process itself too: a kernel just forked may not have made its own group yet (it does so first thing)
    for kill in (os.kill, os.killpg):
        with contextlib.suppress(OSError):
            kill(pid, signal.SIGKILL)


class ForkedProcess:
    """A kernel forked by the zygote, with the part of `subprocess.Popen`'s API jupyter_client uses.

    The zygote is the kernel's parent and reaps it; here, a process that is gone or a zombie has exited.
    """

    stdin = stdout = stderr = None

    def __init__(self, pid: int, zygote: KernelZygote) -> None:
        self.pid = pid
        self._zygote = zygote
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and not _running(self.pid):
            self.returncode = self._zygote.exit_status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
            time.sleep(0.01)
        return code

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class KernelZygote:
    """One zygote process that forks kernels for callers on any event loop. `start()` it, `close()` it."""

    def __init__(self, environment: dict[str, str] | None = None) -> None:
        self._environment = dict(environment) if environment is not None else kernel_environment()
        """The zygote's own environment (each kernel gets its own on top, from the fork request)."""
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._ready: Future[int] = Future()
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[int]]] = {}
        self._exits: dict[int, int] = {}
        self._next_id = 0
        self._retired = False
        self.kernels: set[int] = set()
        """PIDs of the kernels it forked that have not exited."""

    def forks_for(self, env: dict[str, str]) -> bool:
        """Whether a kernel with the environment `env` can be forked here: not if `env` sets a variable Python reads
        as it starts (`PYTHONPATH`, `PYTHONHOME`, `PYTHONSAFEPATH`, …) to other than the zygote started with. Its
        interpreter started long ago, in the zygote: such a kernel is launched, and so gets what it asks for."""
        return all(env.get(name) == self._environment.get(name) for name in {*env, *self._environment}
                   if name.startswith("PYTHON"))

    @property
    def running(self) -> bool:
        """Whether it has done its imports and forks kernels now."""
        return (
            self._process is not None
            and self._process.poll() is None
            and self._ready.done()
            and self._ready.exception() is None
        )

    @property
    def alive(self) -> bool:
        """Whether its process runs (starting or ready)."""
        return self._process is not None and self._process.poll() is None

    @property
    def starting(self) -> bool:
        """Whether its process runs and is still doing its imports."""
        return self.alive and not self._ready.done()

    @property
    def usable(self) -> bool:
        """Whether it may still serve kernels: not launched yet, starting, or running."""
        return self._process is None or self.running or (self.alive and not self._ready.done())

    @property
    def pid(self) -> int | None:
        """The zygote process's PID once started (None before, and after `close()`)."""
        return self._process.pid if self._process else None

    def launch(self) -> None:
        """Start the zygote process without waiting for it (it does its imports meanwhile)."""
        with self._lock:
            if self._process is not None:
                return
            if self._ready.done():  # started and closed before
                self._ready = Future()
            # A forked kernel's /proc/self/environ is the zygote's start-up environment whatever it sets later:
            # the zygote starts with only what every kernel may see, never the host's keys.
            self._process = subprocess.Popen(
                [sys.executable, ZYGOTE_SCRIPT],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env=self._environment,
            )
            assert self._process.stdout is not None
            threading.Thread(
                target=self._read, args=(self._process, self._ready), name="kernel-zygote-reader", daemon=True
            ).start()

    async def start(self) -> None:
        """Start the zygote (if not yet) and wait until it has done its imports."""
        self.launch()
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(self._ready)), _START_TIMEOUT)
        except TimeoutError:
            self.close_now()
            raise

    def _read(self, process: subprocess.Popen[bytes], ready: Future[int]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "ready" in message:
                if not ready.done():
                    ready.set_result(message["ready"])
            elif "exited" in message:
                with self._lock:
                    self._exits[message["exited"]] = message["status"]
                    self.kernels.discard(message["exited"])
                    last = self._retired and not self.kernels
                if last:
                    self._end_input(process)
            else:
                with self._lock:
                    waiter = self._pending.pop(message.get("id", -1), None)
                    if waiter is not None:
                        self.kernels.add(message["pid"])
                if waiter is not None:
                    _answer(*waiter, message["pid"])
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(5.0)  # reaped here when it ends on its own or retires; else by `close_now()`
        error = ConnectionError("the kernel zygote stopped")
        if not ready.done():
            ready.set_exception(error)
        with self._lock:
            waiters, self._pending = list(self._pending.values()), {}
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_fail, future, error)

    async def fork(
        self, argv: list[str], env: dict[str, str], cwd: str, log: str, sandbox: dict[str, Any] | None = None
    ) -> ForkedProcess:
        """A new kernel process running `ipykernel` with `argv` (e.g. `["-f", connection_file]`).

        With `sandbox` (a plan), the process confines itself to it before ipykernel starts. A fork whose caller
        is cancelled before the answer comes is killed when it does.
        """
        if not self.running:
            raise ConnectionError("the kernel zygote is not running")
        process = self._process
        assert process is not None and process.stdin is not None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        env = {**env, "JPY_PARENT_PID": str(process.pid)}  # the kernel exits if the zygote goes
        with self._lock:
            self._next_id += 1
            request = {"id": self._next_id, "argv": argv, "env": env, "cwd": cwd, "log": log, "sandbox": sandbox}
            self._pending[self._next_id] = (loop, future)
            try:
                # one short line; the zygote reads as it forks, so this blocks no longer than a fork
                process.stdin.write((json.dumps(request) + "\n").encode())
                process.stdin.flush()
            except (BrokenPipeError, ValueError, OSError) as exc:
                del self._pending[self._next_id]
                raise ConnectionError("the kernel zygote stopped") from exc
        try:
            pid = await asyncio.wait_for(asyncio.shield(future), _START_TIMEOUT)
        except asyncio.CancelledError:
            # The fork is under way: its answer comes within a fork's time. The kernel it names is killed before the
            # cancellation goes on, so none outlives its caller (one that answers later still is, when it does).
            with contextlib.suppress(BaseException):
                await _kill_and_wait(await asyncio.wait_for(asyncio.shield(future), _CANCELLED_FORK_WAIT))
            future.cancel()
            raise
        except TimeoutError:
            future.cancel()  # a late answer's kernel is killed when it comes
            raise
        return ForkedProcess(pid, self)

    def exit_status(self, pid: int) -> int:
        """The exit code of a kernel the zygote reaped (-9 if it is not known yet)."""
        with self._lock:
            return self._exits.pop(pid, -signal.SIGKILL)

    def retire(self) -> None:
        """Close it once its last kernel has exited (now, if none runs): a newer zygote serves new kernels."""
        with self._lock:
            self._retired = True
            idle = not self.kernels
            process = self._process
        if idle and process is not None:
            self._end_input(process)

    def _end_input(self, process: subprocess.Popen[bytes]) -> None:
        """Close its stdin: it exits (killing its kernels), and the reader thread reaps it."""
        with self._lock, contextlib.suppress(OSError):
            if process.stdin is not None:
                process.stdin.close()

    def close_now(self) -> None:
        """Stop the zygote, without waiting for more than a moment; it kills any kernel it forked still running."""
        with self._lock:
            process = self._process
            if process is None:
                return
            with contextlib.suppress(OSError):
                if process.stdin is not None:
                    process.stdin.close()
        try:
            process.wait(2.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        with self._lock:
            if self._process is process:
                self._process = None

    async def close(self) -> None:
        """Stop the zygote; it kills any kernel it forked that is still running."""
        if self._process is not None:
            await asyncio.to_thread(self.close_now)


async def _kill_and_wait(pid: int) -> None:
    """Kill a forked kernel's process group and wait (up to `_CANCELLED_FORK_WAIT`) until its process has ended."""
    _kill_group(pid)
    deadline = time.monotonic() + _CANCELLED_FORK_WAIT
    while _running(pid) and time.monotonic() < deadline:  # noqa: ASYNC110 - a process, not an event
        await asyncio.sleep(0.002)


def _answer(loop: asyncio.AbstractEventLoop, future: asyncio.Future[int], pid: int) -> None:
    def settle() -> None:
        if future.done():  # the caller was cancelled: nobody will own this kernel
            _kill_group(pid)
        else:
            future.set_result(pid)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the caller's loop is closed
        _kill_group(pid)


def _fail(future: asyncio.Future[int], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


_zygotes: dict[tuple[str, tuple[tuple[str, str], ...]], KernelZygote] = {}
_zygotes_lock = threading.Lock()
_retired: list[KernelZygote] = []


def process_zygote() -> KernelZygote:
    """The kernel zygote this process's agents share (not started: `launch()` or `start()` it).

    One per Python and start-up environment: when the environment a kernel may see changes (HOME, PATH, ...),
    a new zygote serves new kernels and the former one closes once its last kernel has exited.
    """
    key = (sys.executable, tuple(sorted(kernel_environment().items())))
    with _zygotes_lock:
        zygote = _zygotes.get(key)
        if zygote is not None and zygote.usable:
            return zygote
        for other_key, other in list(_zygotes.items()):
            del _zygotes[other_key]
            _retired.append(other)
            other.retire()
        _retired[:] = [z for z in _retired if z.pid is not None and z.kernels]
        zygote = _zygotes[key] = KernelZygote()
        return zygote


def process_zygote_pids() -> set[int]:
    """PIDs of this process's shared zygotes (the current one, and former ones that still serve kernels)."""
    with _zygotes_lock:
        return {z.pid for z in [*_zygotes.values(), *_retired] if z.pid is not None and z.alive}


def close_process_zygote() -> None:
    """Stop this process's shared kernel zygotes and every kernel they forked (also run at interpreter exit).

    Agents started later fork from a new zygote once it runs; until then their kernels launch the ordinary way.
    """
    with _zygotes_lock:
        zygotes = [*_zygotes.values(), *_retired]
        _zygotes.clear()
        _retired.clear()
    for zygote in zygotes:
        zygote.close_now()


atexit.register(close_process_zygote)
