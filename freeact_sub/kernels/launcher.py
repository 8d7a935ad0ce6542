"""Fast kernel launches: the host side of the kernel zygote (see `_kernel_zygote`).

`KernelZygote` starts and talks to the zygote process. `ForkedProvisioner` is a jupyter_client
kernel provisioner that asks the zygote for a kernel process instead of spawning a new Python;
everything else (connection files, signals, kill, restart) works as with jupyter_client's own
local provisioner, through `ForkedProcess`, which stands in for a `subprocess.Popen`. If the
zygote is not running, the provisioner launches kernels the ordinary way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from jupyter_client.provisioning import LocalProvisioner

from .piped_process import PipedProcess

__all__ = ["KERNEL_LAUNCHER", "ForkedProcess", "ForkedProvisioner", "KernelZygote", "kernel_environment"]

KERNEL_LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ipykernel_launcher.py")
"""The script a launched kernel runs (by path, so the kernel does not import `freeact_sub`)."""

ZYGOTE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_kernel_zygote.py")
"""The zygote runs by path too: it imports what a kernel needs, not the `freeact_sub` package."""

_START_TIMEOUT = 60.0
_INHERITED_VARIABLES = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR", "LANG", "LANGUAGE")
"""Host variables a kernel may see; anything else (API keys above all) must be named in `kernel_env`."""
SANDBOX_PLAN_VARIABLE = "FREEACT_SUB_SANDBOX_PLAN"
"""`_ipykernel_launcher.py` (which cannot import this package) reads the sandbox plan from this variable."""


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


class KernelZygote:
    """One zygote process, shared by the kernels of one agent tree. `start()` it, `close()` it."""

    def __init__(self, environment: dict[str, str] | None = None) -> None:
        self._environment = dict(environment) if environment is not None else kernel_environment()
        """The zygote's own environment (each kernel gets its own on top, from the fork request)."""
        self._process: PipedProcess | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[int]] = {}
        self._exits: dict[int, int] = {}
        self._next_id = 0
        self._ready: asyncio.Future[int] | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None and self._ready is not None \
            and self._ready.done() and not self._ready.cancelled() and self._ready.exception() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    async def start(self) -> None:
        """Start the zygote and wait until it has done its imports."""
        if self._process is not None:
            return
        self._ready = asyncio.get_running_loop().create_future()
        # A forked kernel's /proc/self/environ is the zygote's start-up environment whatever it sets later:
        # the zygote starts with only what every kernel may see, never the host's keys.
        self._process = await PipedProcess.start([sys.executable, ZYGOTE_SCRIPT], env=self._environment)
        self._reader = asyncio.create_task(self._read(), name="kernel-zygote-reader")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), _START_TIMEOUT)
        except BaseException:
            await self.close()
            raise

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        try:
            async for line in self._process.stdout:
                message = json.loads(line)
                if "ready" in message and self._ready is not None and not self._ready.done():
                    self._ready.set_result(message["ready"])
                elif "exited" in message:
                    self._exits[message["exited"]] = message["status"]
                elif (future := self._pending.pop(message.get("id", -1), None)) is not None:
                    if not future.done():
                        future.set_result(message["pid"])
        finally:
            error = ConnectionError("the kernel zygote stopped")
            for future in [*self._pending.values(), *([self._ready] if self._ready else [])]:
                if not future.done():
                    future.set_exception(error)
            self._pending.clear()

    async def fork(
        self, argv: list[str], env: dict[str, str], cwd: str, log: str, sandbox: dict[str, Any] | None = None
    ) -> ForkedProcess:
        """A new kernel process running `ipykernel` with `argv` (e.g. `["-f", connection_file]`).

        With `sandbox` (a plan), the process confines itself to it before ipykernel starts.
        """
        if not self.running:
            raise ConnectionError("the kernel zygote is not running")
        assert self._process is not None and self._process.stdin is not None
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        env = {**env, "JPY_PARENT_PID": str(self._process.pid)}  # the kernel exits if the zygote goes
        request = {"id": request_id, "argv": argv, "env": env, "cwd": cwd, "log": log, "sandbox": sandbox}
        self._process.stdin.write((json.dumps(request) + "\n").encode())
        await self._process.stdin.drain()
        return ForkedProcess(await asyncio.wait_for(future, _START_TIMEOUT), self)

    def exit_status(self, pid: int) -> int:
        """The exit code of a kernel the zygote reaped (-9 if it is not known yet)."""
        return self._exits.pop(pid, -signal.SIGKILL)

    async def close(self) -> None:
        """Stop the zygote; it kills any kernel it forked that is still running."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 5.0)
        except (TimeoutError, asyncio.CancelledError):
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        if self._reader is not None:
            with contextlib.suppress(BaseException):
                await self._reader


class ForkedProvisioner(LocalProvisioner):
    """A local provisioner whose kernels are forked by a `KernelZygote` when it runs."""

    zygote: KernelZygote | None = None
    log_path: str = os.devnull
    plan_source: Callable[[], dict[str, Any]] | None = None
    """Where set, the kernel confines itself to the sandbox plan this makes (anew at each start and restart)."""
    sandbox_plan: dict[str, Any] | None = None
    """The plan of the latest launch."""

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> Any:
        self.sandbox_plan = self.plan_source() if self.plan_source is not None else None
        zygote = self.zygote
        if zygote is None or not zygote.running:
            if self.sandbox_plan is not None and KERNEL_LAUNCHER in cmd:
                # our launcher confines itself before ipykernel starts (no second interpreter start)
                env = dict(kwargs.get("env") or os.environ)
                kwargs["env"] = {**env, SANDBOX_PLAN_VARIABLE: json.dumps(self.sandbox_plan)}
            elif self.sandbox_plan is not None:
                from ..sandbox import wrapped_command

                cmd = wrapped_command(self.sandbox_plan, cmd)
            return await super().launch_kernel(cmd, **kwargs)
        argv = _kernel_arguments(cmd)
        env = dict(kwargs.get("env") or os.environ)
        cwd = str(kwargs.get("cwd") or os.getcwd())
        process = await zygote.fork(argv, env, cwd, self.log_path, self.sandbox_plan)
        # ForkedProcess stands in for the Popen that jupyter_client expects here.
        self.process = process  # type: ignore[assignment]
        self.pid = self.pgid = process.pid
        self.cwd = cwd
        return self.connection_info


def _kernel_arguments(cmd: list[str]) -> list[str]:
    """The arguments after the launcher (ours or `-m ipykernel_launcher`) in a kernel command line."""
    if KERNEL_LAUNCHER in cmd:
        return cmd[cmd.index(KERNEL_LAUNCHER) + 1 :]
    if "ipykernel_launcher" in cmd:
        return cmd[cmd.index("ipykernel_launcher") + 1 :]
    raise ValueError(f"not an ipykernel command line: {cmd}")
