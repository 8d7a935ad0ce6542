"""`GatewayKernel`: one IPython kernel on a Jupyter Kernel Gateway or Enterprise Gateway.

It behaves like the local `Kernel`: one cell at a time, output reported as it arrives and read
until the iopub `status: idle` of the request, images saved on the host, a cell past its timeout
interrupted (the gateway's interrupt endpoint) and the kernel restarted if the interrupt does not
take, a kernel that dies detected and restarted, `reset()` and `shutdown()` (DELETE, also on
errors, cancellation and host exit).

Deaths: the gateway restarts a kernel that died on its own and tells its clients with an iopub
`status: restarting` (or `dead` if it could not). A cell is never sent twice: when the news
comes after the request was sent, the kernel may have died before the request reached it or
while running it (a cell that ends its process can do so before the kernel's `busy` leaves it),
so the result says the cell may not have run, and the model decides.

Only the configured `kernel_env` goes to the gateway as the kernel's environment (never the
host's environment, whose API keys stay on the host), with `KERNEL_USERNAME` set to the
configured user (`KernelGatewayConfig.kernel_username`): Enterprise Gateway starts kernels only
for users it authorizes. A gateway passes on only `KERNEL_*` names and those it allows (Kernel
Gateway: `--JupyterWebsocketPersonality.env_whitelist`; Enterprise Gateway: `EG_CLIENT_ENVS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import KernelError
from ._gateway_client import Closed, GatewayApi, KernelChannels
from .cell_run import (
    DEATH_NOTICE,
    DIED_BEFORE_NOTICE,
    INTERRUPT_GRACE,
    STUCK_NOTICE,
    CellClock,
    CellOutput,
    OutputCallback,
)
from .local import ExecutionResult, render_output, save_image

if TYPE_CHECKING:
    from ..config.agent_config import KernelGatewayConfig

__all__ = ["GatewayKernel"]

_POLL = 0.5
_LIVENESS_INTERVAL = 5.0
_STARTUP_TIMEOUT = 60.0
_CUT_SHORT_WAIT = 10.0
_DIED_UNSEEN_NOTICE = ("\nThe kernel died before this cell reported that it started, and was restarted: all its "
                       "state (variables, imports, definitions) was lost. The cell may not have run, or may have "
                       "ended the kernel itself; run it again if you still need it.\n")
# Run in a new kernel: its IOPub socket may queue without limit for each subscriber, like our local
# kernels' client sockets. ZeroMQ's default (1000 messages) makes a kernel drop output that the
# gateway cannot forward as fast as it is printed (10,000 flushed lines lost ~10% here). The limit
# applies to connections made after it is set, so the websocket is opened again afterwards.
_UNBOUNDED_IOPUB = """
def _freeact_sub_unbounded_iopub():
    import threading, zmq
    from ipykernel.kernelapp import IPKernelApp
    thread = IPKernelApp.instance().iopub_thread
    applied = threading.Event()
    def apply():
        thread.socket.setsockopt(zmq.SNDHWM, 0)
        applied.set()
    thread.io_loop.add_callback(apply)
    applied.wait(5)
try:
    _freeact_sub_unbounded_iopub()
finally:
    del _freeact_sub_unbounded_iopub
"""
_GAP_NOTICE = "\n[The connection to the kernel gateway broke and was made again; output printed meanwhile is lost.]\n"
_LOST_END_NOTICE = ("\n[The end of this cell's output did not arrive through the kernel gateway; the gateway "
                    "reports the kernel idle, so the cell has ended.]\n")
_RATE_LIMIT_NOTICE = ("\n[The kernel gateway dropped part of this output: its IOPub rate limit was exceeded. "
                      "Print less, or start the gateway with --ZMQChannelsWebsocketConnection.limit_rate=False.]\n")


@dataclass(frozen=True)
class _Cell:
    """One `execute()` call's arguments."""

    code: str
    timeout: float | None
    on_output: OutputCallback | None
    paused: Callable[[], float] | None
    store_history: bool


class _KernelRestarted(Exception):
    """The gateway said the kernel died (`restarting`) or could not be restarted (`dead`)."""

    def __init__(self, state: str) -> None:
        self.state = state


class GatewayKernel:
    """One kernel on a gateway. Use `async with GatewayKernel(...)` or `start()` / `shutdown()`."""

    def __init__(
        self,
        gateway: KernelGatewayConfig,
        *,
        env: Mapping[str, str] | None = None,
        images_dir: str | Path | None = None,
        working_dir: str | Path | None = None,
        label: str = "kernel",
    ) -> None:
        self.gateway = gateway
        self.working_dir = Path(working_dir or Path.cwd())
        """Where images go by default; the kernel itself runs in the gateway's working directory."""
        self.images_dir = Path(images_dir) if images_dir else self.working_dir / ".freeact-sub" / "images"
        self.label = label
        """Prefix of saved image files; the agent sets its id here."""
        self.kernel_id: str | None = None
        """The gateway's id of the kernel while it runs."""
        self.restarts = 0
        """How often the kernel was restarted (after a death, a stuck interrupt or `reset()`)."""
        self._env = dict(env or {})
        self._start_env = self._env
        """What every kernel start sends as the kernel's environment: `env` and `KERNEL_USERNAME`."""
        self._api: GatewayApi | None = None
        self._channels: KernelChannels | None = None
        self._unprepared = True
        """The kernel process is new since the last `_prepare()`."""
        self._startup_code: list[str] = []
        """Run again before the first cell of every new kernel process (`run_at_start`)."""
        self._held: dict[str, Any] | Closed | None = None
        """A message read ahead of its turn (news of a restart or a closed websocket), delivered next."""
        self._lock = asyncio.Lock()
        self._image_count = 0

    async def __aenter__(self) -> GatewayKernel:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    @property
    def url(self) -> str:
        return self.gateway.url

    @property
    def pid(self) -> int | None:
        """Always None: the kernel's process is on the gateway's machine."""
        return None

    @property
    def tools_socket(self) -> str | None:
        """Always None: MCP tools from code need kernels on this machine."""
        return None

    @property
    def started(self) -> bool:
        return self._api is not None

    # -- start and connect ---------------------------------------------------------------------

    async def start(self, timeout: float | None = None) -> None:
        """Start a kernel on the gateway and wait until it answers; a `KernelError` names the gateway if not."""
        if self.kernel_id is not None:
            return
        timeout = timeout or self.gateway.start_timeout
        self._start_env = {**self._env, "KERNEL_USERNAME": self.gateway.kernel_username(self._env)}
        self._api = GatewayApi(
            self.gateway.url,
            self.gateway.headers(),
            token_env=self.gateway.token_env,
            request_timeout=self.gateway.request_timeout,
            validate_cert=self.gateway.validate_cert,
        )
        try:
            await self._start_remote(timeout)
        except BaseException as exc:
            await self.shutdown()
            if isinstance(exc, KernelError):
                raise
            if isinstance(exc, Exception):
                raise KernelError(f"kernel gateway {self.url}: the kernel did not start: {exc}") from exc
            raise

    async def _start_remote(self, timeout: float) -> None:
        assert self._api is not None
        deadline = time.monotonic() + timeout
        wanted = str(uuid.uuid4())
        self.kernel_id = wanted  # known before the request: a start cut short is deleted all the same
        post = asyncio.ensure_future(self._api.start_kernel(self.gateway.kernel_name, self._start_env, timeout, wanted))
        try:
            self.kernel_id = await asyncio.shield(post)
        except asyncio.CancelledError:
            # the gateway goes on starting the kernel: wait a little for it, so that it can be deleted now
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(post), _CUT_SHORT_WAIT)
            if post.done() and not post.cancelled() and post.exception() is None:
                self.kernel_id = post.result()
            raise
        self._unprepared = True
        await self._connect(max(1.0, deadline - time.monotonic()))
        await self._prepare(max(1.0, deadline - time.monotonic()))

    async def _connect(self, timeout: float) -> None:
        """A new websocket to the kernel in place of the current one, once the kernel answers on it."""
        await self._reopen(timeout)
        await self._wait_until_ready(timeout)

    async def _reopen(self, timeout: float) -> None:
        """A new websocket to the kernel in place of the current one (closed, with what it still held)."""
        assert self._api is not None and self.kernel_id is not None
        channels = KernelChannels(self._api, self.kernel_id)
        await channels.open(timeout)
        old, self._channels = self._channels, channels
        self._held = None
        if old is not None:
            await old.close()

    async def _prepare(self, timeout: float) -> None:
        """Once per kernel process, before its first cell: lift its IOPub queue limit, then reconnect."""
        if not self._unprepared:
            return
        self._unprepared = False
        try:
            applied = await self._run_silently(_UNBOUNDED_IOPUB, timeout)
        except TimeoutError:
            return  # a kernel that is not ipykernel, or a slow one: it runs with its defaults
        except _KernelRestarted as restarted:
            await self._recover(restarted.state)  # the next cell tries again
            return
        if applied:
            await self._connect(timeout)
        for code in self._startup_code:
            await self._execute(_Cell(code, _STARTUP_TIMEOUT, None, None, False), "")

    async def _run_silently(self, code: str, timeout: float) -> bool:
        """Run setup code that leaves no trace in the kernel's history; whether it ran without error."""
        assert self._channels is not None
        content = {"code": code, "silent": True, "store_history": False, "user_expressions": {},
                   "allow_stdin": False, "stop_on_error": False}
        msg_id = await self._channels.send("shell", "execute_request", content)
        deadline = time.monotonic() + timeout
        failed = False
        while time.monotonic() < deadline:
            message = await self._next(max(0.0, deadline - time.monotonic()))
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            failed = failed or message.get("msg_type") == "error"
            if message.get("msg_type") == "status" and message.get("content", {}).get("execution_state") == "idle":
                return not failed
        return False

    async def _await_restarted(self) -> None:
        """After the gateway's `restarting` news: a new websocket, once the restarted kernel answers on it.

        The old websocket is closed at once. A gateway that restarts a kernel on new ports (it
        does so for a kernel that dies soon after it started) leaves it connected to the old ports;
        and a request still queued on it could reach the restarted kernel while it starts up.
        """
        await self._connect(self.gateway.start_timeout)

    async def _wait_until_ready(self, timeout: float) -> None:
        """Wait until the kernel answers `kernel_info` on the shell channel and its iopub messages reach us."""
        assert self._channels is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            request = await self._channels.send("shell", "kernel_info_request", {})
            replied = iopub_seen = False
            round_end = min(deadline, time.monotonic() + 2.0)
            while time.monotonic() < round_end and not (replied and iopub_seen):
                try:
                    message = await self._next(max(0.0, round_end - time.monotonic()))
                except TimeoutError:
                    break
                except _KernelRestarted as restarted:
                    if restarted.state == "dead":
                        raise KernelError(f"kernel gateway {self.url}: the kernel died and could not be restarted") \
                            from None
                    continue
                if message.get("parent_header", {}).get("msg_id") != request:
                    continue
                replied = replied or message.get("channel") == "shell"
                iopub_seen = iopub_seen or message.get("channel") == "iopub"
            if replied and iopub_seen:
                return
        raise KernelError(f"kernel gateway {self.url}: the kernel did not answer within {timeout:g} s")

    async def _next(self, wait: float) -> dict[str, Any]:
        """The next message within `wait` s; raises `_KernelRestarted` for the gateway's restart news."""
        assert self._channels is not None
        if self._held is not None:
            item, self._held = self._held, None
            return self._checked(item)
        try:
            item = await asyncio.wait_for(self._channels.messages.get(), wait) if wait > 0 else \
                self._channels.messages.get_nowait()
        except asyncio.QueueEmpty:
            raise TimeoutError from None
        return self._checked(item)

    def _checked(self, item: dict[str, Any] | Closed) -> dict[str, Any]:
        if isinstance(item, Closed):
            raise _KernelRestarted("closed")
        if (
            item.get("msg_type") == "status"
            and not item.get("parent_header")
            and item.get("content", {}).get("execution_state") in ("restarting", "dead")
        ):
            raise _KernelRestarted(item["content"]["execution_state"])
        return item

    # -- cells -------------------------------------------------------------------------------------

    async def is_alive(self) -> bool:
        """Whether the gateway has the kernel and it is not dead."""
        return await self._state() not in (None, "dead")

    async def _state(self) -> str | None:
        """The kernel's execution state by the gateway's account; None if it has no such kernel or is unreachable."""
        if self._api is None or self.kernel_id is None:
            return None
        try:
            model = await self._api.kernel(self.kernel_id)
        except KernelError:
            return None
        return None if model is None else str(model.get("execution_state"))

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
        the cell's seconds so far do not count. `store_history=False` keeps the code out of
        IPython's history and execution count.
        """
        cell = _Cell(code, timeout, on_output, paused, store_history)
        async with self._lock:
            if self._api is None:
                raise KernelError("the kernel is not running")
            notice = ""
            if self.kernel_id is None:  # lost earlier, and the gateway could not give us a new one then
                try:
                    await self._start_remote(self.gateway.start_timeout)
                except KernelError as exc:
                    return ExecutionResult(text=f"The kernel is lost: {exc}\n", status="kernel_died")
                notice = DIED_BEFORE_NOTICE
            elif await self._died_since_last_cell():
                notice = DIED_BEFORE_NOTICE
            await self._prepare(self.gateway.start_timeout)
            return await self._execute(cell, notice)

    async def _died_since_last_cell(self) -> bool:
        """Read what arrived between cells; True (after recovering) if the kernel died meanwhile."""
        assert self._channels is not None
        died = False
        while True:
            try:
                self._checked(self._channels.messages.get_nowait())
            except asyncio.QueueEmpty:
                break
            except _KernelRestarted as restarted:
                died = True
                if restarted.state != "restarting":
                    await self._recover(restarted.state)
                    return True
        if died:
            self.restarts += 1
            self._unprepared = True
            await self._await_restarted()
        return died

    async def _execute(self, cell: _Cell, notice: str) -> ExecutionResult:
        """Send the cell and read its output until its `status: idle`, handling timeouts, deaths and cancellation."""
        assert self._channels is not None
        content = {"code": cell.code, "silent": False, "store_history": cell.store_history, "user_expressions": {},
                   "allow_stdin": False, "stop_on_error": True}
        msg_id = await self._channels.send("shell", "execute_request", content)
        timeout, on_output, paused = cell.timeout, cell.on_output, cell.paused
        result = ExecutionResult(text="")
        output = CellOutput(on_output)
        emit = output.emit
        await emit(notice)
        clock = CellClock(timeout, paused)
        running = False  # the kernel said `busy` for this request
        last_check = time.monotonic()
        quiet_idle = 0
        rate_limited = False
        try:
            while True:
                now = clock.now()
                if clock.stuck(now):
                    await self._restart()
                    await emit(STUCK_NOTICE)
                    break
                if clock.due(now):
                    result.status = "timeout"
                    clock.interrupted_at = now
                    await self.interrupt()
                    continue
                try:
                    batch = await self._receive_batch(clock.wait(now, _POLL))
                except _KernelRestarted as news:
                    if news.state != "closed" or not await self.is_alive():
                        raise
                    # only the websocket broke (the kernel runs on): go on reading on a new one
                    await self._reopen(self.gateway.start_timeout)
                    await emit(_GAP_NOTICE)
                    continue
                except TimeoutError:
                    if now - last_check > _LIVENESS_INTERVAL:
                        last_check = now
                        state = await self._state()
                        if state in (None, "dead"):  # gone from the gateway (culled, deleted) or dead
                            raise _KernelRestarted("dead") from None
                        # idle by the gateway's own account twice in a row while we heard nothing: our
                        # connection lost the end of the cell; waiting longer would wait forever
                        quiet_idle = quiet_idle + 1 if state == "idle" else 0
                        if quiet_idle >= 2:
                            await emit(_LOST_END_NOTICE)
                            break
                    continue
                quiet_idle = 0
                texts: list[str] = []
                finished = False
                for msg in batch:
                    if msg.get("parent_header", {}).get("msg_id") != msg_id:
                        continue
                    kind, body = msg.get("msg_type", ""), msg.get("content", {})
                    if kind == "status":
                        state = body.get("execution_state")
                        running = running or state == "busy"
                        if state == "idle":
                            finished = True
                            break
                        continue
                    if kind == "error" and result.status == "ok":
                        result.status = "error"
                    if kind == "stream" and "IOPub message rate exceeded" in body.get("text", ""):
                        rate_limited = True
                        continue
                    texts.append(render_output(kind, body, result, self._save_image))
                await emit("".join(texts))
                if finished:
                    break
            if rate_limited:
                await emit(_RATE_LIMIT_NOTICE)
            if result.status == "timeout":
                await emit(clock.timeout_notice())
        except _KernelRestarted as restarted:
            # Without a `busy` we cannot tell a request the dead kernel never read from a cell that
            # ended its kernel at once (its `busy` dies with the process): never send it again.
            result.status = "kernel_died"
            try:
                await self._recover(restarted.state)
            except KernelError as exc:
                await emit(f"\nThe kernel was lost and could not be replaced: {exc}\n")
            else:
                await emit(DEATH_NOTICE if running else _DIED_UNSEEN_NOTICE)
        except asyncio.CancelledError:
            # The cell must be stopped before the lock is released, however often we are cancelled meanwhile.
            cleanup = asyncio.ensure_future(self._stop_running_cell(msg_id))
            while not cleanup.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(cleanup)
            if not cleanup.cancelled():
                cleanup.exception()  # retrieved; a failed cleanup shows on the next use
            raise
        result.text = output.text
        return result

    def _save_image(self, encoded: str) -> Path:
        self._image_count += 1
        return save_image(self.images_dir, self.label, self._image_count, encoded, working_dir=self.working_dir)

    async def _receive_batch(self, wait: float) -> list[dict[str, Any]]:
        """The next message (waiting up to `wait` s) and every message already queued behind it."""
        batch = [await self._next(wait)]
        assert self._channels is not None
        queue = self._channels.messages
        while len(batch) < 1000 and not queue.empty():
            item = queue.get_nowait()
            try:
                batch.append(self._checked(item))
            except _KernelRestarted:
                self._held = item  # the news comes with the next read, after this batch's output
                break
        return batch

    async def _stop_running_cell(self, msg_id: str) -> None:
        """After a cancellation: interrupt, then wait briefly for the cell's idle status; restart if it stays busy."""
        await self.interrupt()
        deadline = time.monotonic() + INTERRUPT_GRACE
        try:
            while time.monotonic() < deadline:
                try:
                    msg = await self._next(_POLL)
                except TimeoutError:
                    continue
                if (
                    msg.get("parent_header", {}).get("msg_id") == msg_id
                    and msg.get("msg_type") == "status"
                    and msg.get("content", {}).get("execution_state") == "idle"
                ):
                    return
        except _KernelRestarted as restarted:
            await self._recover(restarted.state)
            return
        await self._restart()

    async def run_at_start(self, code: str, *, wait: bool = True) -> None:
        """Run `code` now and again after every restart, before any other cell (not stored in the history).

        A gateway kernel always runs it now (`wait` is for local kernels).
        """
        async with self._lock:
            if self._api is None or self.kernel_id is None:
                raise KernelError("the kernel is not running")
            self._startup_code.append(code)
            await self._execute(_Cell(code, _STARTUP_TIMEOUT, None, None, False), "")

    async def interrupt(self) -> None:
        """Interrupt the running cell (the gateway's `POST /api/kernels/{id}/interrupt`)."""
        if self._api is not None and self.kernel_id is not None:
            with contextlib.suppress(KernelError):
                await self._api.interrupt(self.kernel_id)

    async def reset(self) -> None:
        """Restart the kernel with a clean state (waits for a running cell's lock)."""
        async with self._lock:
            await self._restart()
            await self._prepare(self.gateway.start_timeout)

    async def _restart(self) -> None:
        """Restart the kernel through the gateway; start a new one if the gateway lost it."""
        assert self._api is not None and self.kernel_id is not None
        self.restarts += 1
        self._unprepared = True
        if not await self._api.restart(self.kernel_id, self.gateway.start_timeout):
            await self._replace()
            return
        await self._wait_until_ready(self.gateway.start_timeout)

    async def _recover(self, state: str = "dead") -> None:
        """After the gateway's news of a death: wait for its restart, or replace a kernel it could not restart."""
        assert self._api is not None and self.kernel_id is not None
        self.restarts += 1
        self._unprepared = True
        if state == "restarting":
            await self._await_restarted()
            return
        if state == "closed" and await self.is_alive():
            await self._connect(self.gateway.start_timeout)  # only the connection broke
            return
        await self._replace()

    async def _replace(self) -> None:
        """A new kernel in place of one the gateway no longer has (or cannot restart)."""
        assert self._api is not None
        old, self.kernel_id = self.kernel_id, None
        if old is not None:
            with contextlib.suppress(KernelError):
                await self._api.delete(old, timeout=5.0)
        await self._start_remote(self.gateway.start_timeout)

    async def shutdown(self, *, now: bool = False) -> None:
        """Close the websocket and delete the kernel on the gateway (a few seconds at most).

        A kernel the gateway cannot be told about (it is down) is left to its idle culling.
        `now` is accepted for symmetry with the local kernel: the gateway decides how it stops.
        """
        kernel_id, self.kernel_id = self.kernel_id, None
        channels, self._channels = self._channels, None
        api, self._api = self._api, None

        async def stop() -> None:
            if channels is not None:
                await channels.close()
            if api is not None:
                try:
                    if kernel_id is not None:
                        with contextlib.suppress(KernelError):
                            await api.delete(kernel_id, timeout=5.0)
                finally:
                    await api.aclose()

        await asyncio.shield(stop())
