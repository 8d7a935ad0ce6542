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
import random
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from hmac import compare_digest
from typing import IO, Any, cast

import zmq
import zmq.asyncio
from jupyter_client import AsyncKernelClient, AsyncKernelManager
from jupyter_client.connect import channel_socket_types
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.session import Session

from ..errors import KernelError
from .cell_reader import BATCH
from .launcher import KERNEL_LAUNCHER, ForkedProvisioner, KernelZygote
from .messages import MAX_MESSAGE_BYTES, Message

__all__ = [
    "KERNEL_OPTIONS",
    "KERNEL_WRITES",
    "TOOLS_SOCKET_VARIABLE",
    "KernelClient",
    "confined_plan",
    "decode",
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
IOPUB_QUEUE = 16
"""Messages the host's iopub socket holds before it stops reading the kernel's (which then queue in the kernel's own
memory: its publisher's send queue is unlimited): with `MAX_MESSAGE_BYTES` a part, a fixed bound on the host."""
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
    """A kernel client whose sockets suit a kernel that is just starting, may print a lot, and may be hostile.

    - The iopub socket never drops output, and holds a bounded queue. ZeroMQ's default high-water
      marks (1000 messages each side) let a kernel that prints faster than we read (e.g. 10,000
      `print(..., flush=True)`) lose messages: the kernel's publisher drops what it cannot queue.
      The kernel's publisher has an unlimited send queue (`_ipykernel_launcher`), so past
      `IOPUB_QUEUE` messages here the rest waits in the kernel's memory, not the host's.
    - No message part larger than `MAX_MESSAGE_BYTES` is received (ZeroMQ's `MAXMSGSIZE`): a kernel
      holds its connection key and may send anything, of any size.
    - Sockets retry a connection every 10 ms instead of ZeroMQ's 100 ms: we connect while the
      kernel is still binding its sockets, and each missed retry is start-up time lost.
    """

    _poller: zmq.asyncio.Poller | None = None

    def _create_connected_socket(self, channel: str, identity: bytes | None = None) -> zmq.Socket:
        socket = self.context.socket(channel_socket_types[channel])
        socket.linger = 1000
        socket.reconnect_ivl = _RECONNECT_INTERVAL_MS
        socket.maxmsgsize = MAX_MESSAGE_BYTES
        if channel == "iopub":
            socket.rcvhwm = IOPUB_QUEUE
        if identity:
            socket.identity = identity
        socket.connect(self._make_url(channel))
        return socket

    def poller(self) -> zmq.asyncio.Poller:
        """One poller over the iopub and shell sockets (made once the channels run)."""
        if self._poller is None:
            self._poller = zmq.asyncio.Poller()
            self._poller.register(self.iopub_channel.socket, zmq.POLLIN)
            self._poller.register(self.shell_channel.socket, zmq.POLLIN)
        return self._poller

    def stop_channels(self) -> None:
        """Stop the channels that run, and only those: jupyter_client's own looks at all five through properties
        that make each missing channel first (three sockets a kernel, connected only to be closed)."""
        self._poller = None
        for channel in (
            self._shell_channel,
            self._iopub_channel,
            self._stdin_channel,
            self._hb_channel,
            self._control_channel,
        ):
            if channel is not None and channel.is_alive():
                channel.stop()
        if self._created_context and not self.context.closed:
            self.context.destroy(linger=100)


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
    return {
        **plan,
        "write": [*plan.get("write", ()), *writes],
        "scratch": folder,
        "private_root": os.path.dirname(folder),
        "own": [folder],
    }


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


async def _answer_arrives(request: str, client: Any, socket: Any, until: float) -> bool:
    """Whether a message whose parent is `request` arrives on `socket` before `until`; others are dropped."""
    while (left := until - time.monotonic()) > 0:
        if not await socket.poll(left * 1000):
            return False
        message = await _decoded(client, socket)  # None (cannot be decoded): passed over
        parent = message.get("parent_header") if message is not None else None
        if isinstance(parent, dict) and parent.get("msg_id") == request:
            return True
    return False


async def wait_until_ready(client: Any, timeout: float, is_alive: Callable[[], Awaitable[bool]], log_path: str) -> None:
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
        if await _answer_arrives(request, client, client.shell_channel.socket, round_end) and await _answer_arrives(
            request, client, client.iopub_channel.socket, round_end
        ):
            return
        if not await is_alive():
            raise KernelError(f"the kernel died while starting{log_details(log_path)}")
    raise KernelError(f"the kernel did not answer within {timeout:g} s{log_details(log_path)}")


async def _decoded(client: Any, socket: Any) -> Message | None:
    """The next message on `socket`, already there; None if it cannot be decoded (a kernel may forge anything)."""
    frames = await socket.recv_multipart()
    try:
        return decode(client.session, frames)
    except Exception:  # bad signature, bad JSON, too deep, wrong types: all malformed alike
        return None


def decode(session: Session, frames: list[bytes]) -> Message:
    """A message from its frames, as `Session.deserialize` makes it but with the dates left as text.

    The signature is checked (and a repeated one refused) as jupyter_client does; the parts are unpacked by the
    session's unpacker. jupyter_client also parses every ISO date in the header and the parent's header with
    dateutil, a fifth of a message's decoding, for dates nothing here reads. Raises `ValueError` on a message
    that is not signed right or not whole.
    """
    _, received = session.feed_identities(frames)
    parts = cast(list[bytes], received)  # received as bytes (copied), never as zmq frames
    if len(parts) < 5:
        raise ValueError(f"a message has 5 parts or more, not {len(parts)}")
    if session.auth is not None:
        signature = parts[0]
        if not signature:
            raise ValueError("unsigned message")
        history = session.digest_history
        if signature in history:
            raise ValueError("duplicate signature")
        if not compare_digest(signature, session.sign(parts[1:5])):
            raise ValueError("invalid signature")
        if session.digest_history_size:
            history.add(signature)
            if len(history) > session.digest_history_size:  # as jupyter_client does: forget a tenth, at random
                history.difference_update(random.sample(sorted(history), max(1, len(history) // 10)))
    header = session.unpack(parts[1])
    return {
        "header": header,
        "msg_id": header["msg_id"],
        "msg_type": header["msg_type"],
        "parent_header": session.unpack(parts[2]),
        "metadata": session.unpack(parts[3]),
        "content": session.unpack(parts[4]),
        "buffers": [memoryview(part) for part in parts[5:]],
    }


async def receive_batch(client: KernelClient, wait: float) -> list[Message | None]:
    """The next iopub or shell messages (waiting up to `wait` s) and every message already queued behind them.

    Shell messages (a cell's `execute_reply`) come first; None stands for a message that could not be decoded.
    Raises `TimeoutError` if none came.
    """
    ready = dict(await client.poller().poll(wait * 1000))
    if not ready:
        raise TimeoutError
    iopub, shell = client.iopub_channel.socket, client.shell_channel.socket
    batch: list[Message | None] = []
    if shell in ready:
        batch.append(await _decoded(client, shell))
        while await shell.poll(0):
            batch.append(await _decoded(client, shell))
    if iopub in ready:
        # only printing comes in floods: take what is queued, up to a batch
        while len(batch) < BATCH:
            batch.append(await _decoded(client, iopub))
            if not await iopub.poll(0):
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
