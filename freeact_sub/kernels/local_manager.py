"""The jupyter_client side of a local kernel, for `Kernel`: its manager, its client's sockets, its folder and log.

`new_manager` builds a kernel manager that runs our launcher in the host's Python, forked by the
zygote when there is one, with `ipc` sockets in the kernel's private folder; `KernelClient`
tunes the sockets; `receive_batch`, `drain_shell` and `wait_until_ready` read them;
`stop_process` kills a kernel without jupyter_client's waits. Everything here is plumbing:
what a cell does with the messages is `cell_reader`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import IO, Any

import zmq
import zmq.asyncio
from jupyter_client import AsyncKernelClient, AsyncKernelManager
from jupyter_client.connect import channel_socket_types
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

from ..errors import KernelError
from .cell_reader import BATCH, Message
from .launcher import KERNEL_LAUNCHER, ForkedProvisioner, KernelZygote

__all__ = [
    "KERNEL_OPTIONS",
    "KERNEL_WRITES",
    "TOOLS_SOCKET_VARIABLE",
    "KernelClient",
    "confined_plan",
    "drain_shell",
    "log_details",
    "new_manager",
    "open_log",
    "receive_batch",
    "sandbox_environment",
    "stop_process",
    "wait_until_ready",
    "zmq_context",
]

_RECONNECT_INTERVAL_MS = 10
_KILL_POLL = 0.002
"""Seconds between looks at a killed kernel: is it gone yet?"""
_KILL_WAIT = 5.0
KERNEL_WRITES = ("run", "tmp", "ipython")
"""The kernel's own folders that it may write (sockets, temp files, IPython's folder), inside its private one."""
_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
TOOLS_SOCKET_VARIABLE = "FREEACT_SUB_TOOLS_SOCKET"
"""Where a kernel binds the listening socket of its code-tools channel before any of its code runs."""

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


def zmq_context() -> zmq.asyncio.Context:
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


class KernelClient(AsyncKernelClient):
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


def new_manager(
    folder: str,
    *,
    zygote: KernelZygote | None,
    log_path: str,
    plan_source: Callable[[], dict[str, Any]] | None,
) -> AsyncKernelManager:
    """A manager (not started) for a kernel whose private folder is `folder`: connection file and `ipc` sockets
    in it, forked by `zygote` if there is one, confined to `plan_source()`'s sandbox plan at each (re)start."""
    manager = AsyncKernelManager(
        kernel_name="python3",
        kernel_spec_manager=_HostPythonSpecs(),
        transport="ipc",
        ip=os.path.join(folder, "run", "socket"),
        connection_file=os.path.join(folder, "connection.json"),
    )
    manager.context = zmq_context()
    manager.shutdown_wait_time = 2.0
    manager.client_factory = KernelClient
    manager.kernel_id = uuid.uuid4().hex
    provisioner = ForkedProvisioner(kernel_id=manager.kernel_id, kernel_spec=manager.kernel_spec, parent=manager)
    provisioner.zygote = zygote
    provisioner.log_path = log_path
    if plan_source is not None:
        provisioner.plan_source = plan_source  # made anew at each start and restart
    manager.provisioner = provisioner
    return manager


def sandbox_environment(env: dict[str, str], folder: str) -> None:
    """Temp files, IPython's folder and caches in the kernel's own folders (the rest is not writable)."""
    temp = os.path.join(folder, "tmp")
    for name in ("TMPDIR", "TEMP", "TMP"):
        env[name] = temp
    # a private IPython folder (unless kernel_env names one): ~/.ipython is not writable in a sandbox
    env.setdefault("IPYTHONDIR", os.path.join(folder, "ipython"))
    env.setdefault("MPLCONFIGDIR", os.path.join(temp, "matplotlib"))
    env.setdefault("XDG_CACHE_HOME", os.path.join(temp, "cache"))


def confined_plan(plan: Mapping[str, Any], folder: str) -> dict[str, Any]:
    """`plan` for the kernel whose private folder is `folder`: its own folders writable, no other kernel's visible."""
    writes = [os.path.join(folder, own) for own in KERNEL_WRITES]
    return {**plan, "write": [*plan.get("write", ()), *writes], "scratch": folder,
            "private_root": os.path.dirname(folder), "own": [folder]}


def open_log(path: str) -> IO[bytes]:
    """The kernel's log, for its stderr, opened for appending without following a link."""
    return os.fdopen(os.open(path, _LOG_FLAGS, 0o600), "ab")


def log_details(path: str, lines: int = 15) -> str:
    """The end of the kernel's log, for an error message (empty if there is none)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as log:
            tail = "\n".join(log.read().strip().splitlines()[-lines:])
    except OSError:
        tail = ""
    return f"\nkernel log:\n{tail}" if tail else ""


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


async def wait_until_ready(
    client: Any, timeout: float, is_alive: Callable[[], Awaitable[bool]], log_path: str
) -> None:
    """Wait until the kernel answers `kernel_info` and its iopub messages reach us.

    Like `wait_for_ready` of jupyter_client, but it watches iopub for the status messages of
    its own request instead of sleeping for a fixed time: a kernel is usable the moment both
    channels work.
    """
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
        if not await is_alive():
            raise KernelError(f"the kernel died while starting{log_details(log_path)}")
    raise KernelError(f"the kernel did not answer within {timeout:g} s{log_details(log_path)}")


async def receive_batch(client: Any, wait: float) -> list[Message]:
    """The next iopub message (waiting up to `wait` s) and every message already queued behind it.

    Raises `TimeoutError` if none came.
    """
    try:
        batch = [await client.get_iopub_msg(timeout=wait)]
    except queue.Empty:
        raise TimeoutError from None
    if batch[0]["msg_type"] != "stream":  # only printing comes in floods
        return batch
    while len(batch) < BATCH:
        try:
            batch.append(await client.get_iopub_msg(timeout=0))
        except queue.Empty:
            break
    return batch


async def drain_shell(client: Any) -> None:
    """Drop the `execute_reply` messages (iopub carries everything) so they do not pile up."""
    if client is None:
        return
    with contextlib.suppress(Exception):
        while await client.shell_channel.msg_ready():
            await client.shell_channel.get_msg(timeout=0)


async def stop_process(manager: AsyncKernelManager, now: bool) -> None:
    """Stop the kernel process: a shutdown request first, or (`now`) a kill without jupyter_client's waits."""
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
