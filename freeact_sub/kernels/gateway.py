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

The connection (REST API, kernel id, websocket) is `GatewayConnection`'s; a cell's messages are
read by `cell_reader`, shared with the local backend.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import KernelError
from .cell_reader import CellHooks, KernelLost, read_cell
from .cell_run import DEATH_NOTICE, DIED_BEFORE_NOTICE, save_image
from .cells import Cell, ExecutionResult, RunsCells
from .gateway_connection import GatewayConnection

if TYPE_CHECKING:
    from ..config.agent_config import KernelGatewayConfig

__all__ = ["GatewayKernel"]

_LIVENESS_INTERVAL = 5.0
"""Seconds between two looks at the kernel's state (a REST request) while a cell is silent."""
_STARTUP_TIMEOUT = 60.0
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


def _rate_limited(kind: str, content: dict[str, Any]) -> bool:
    """The gateway's word that it dropped output (its IOPub rate limit), which stands in the output stream."""
    return kind == "stream" and "IOPub message rate exceeded" in content.get("text", "")


class GatewayKernel(RunsCells):
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
        self.restarts = 0
        """How often the kernel was restarted (after a death, a stuck interrupt or `reset()`)."""
        self._env = dict(env or {})
        self._connection: GatewayConnection | None = None
        self._unprepared = True
        """The kernel process is new since the last `_prepare()`."""
        self._startup_code: list[str] = []
        """Run again before the first cell of every new kernel process (`run_at_start`)."""
        self._lock = asyncio.Lock()
        self._image_count = 0

    @property
    def url(self) -> str:
        return self.gateway.url

    @property
    def kernel_id(self) -> str | None:
        """The gateway's id of the kernel while it runs."""
        return self._connection.kernel_id if self._connection is not None else None

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
        return self._connection is not None

    # -- start -------------------------------------------------------------------------------------

    async def start(self, timeout: float | None = None) -> None:
        """Start a kernel on the gateway and wait until it answers; a `KernelError` names the gateway if not."""
        if self.kernel_id is not None:
            return
        timeout = timeout or self.gateway.start_timeout
        start_env = {**self._env, "KERNEL_USERNAME": self.gateway.kernel_username(self._env)}
        self._connection = GatewayConnection(self.gateway, start_env)
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
        """A new kernel on the gateway, connected and prepared."""
        assert self._connection is not None
        deadline = time.monotonic() + timeout
        await self._connection.start(timeout)
        self._unprepared = True
        await self._prepare(max(1.0, deadline - time.monotonic()))

    async def _prepare(self, timeout: float) -> None:
        """Once per kernel process, before its first cell: lift its IOPub queue limit, then reconnect."""
        assert self._connection is not None
        if not self._unprepared:
            return
        self._unprepared = False
        try:
            applied = await self._connection.run_silently(_UNBOUNDED_IOPUB, timeout)
        except TimeoutError:
            return  # a kernel that is not ipykernel, or a slow one: it runs with its defaults
        except KernelLost as lost:
            await self._recover(lost.state)  # the next cell tries again
            return
        if applied:
            await self._connection.connect(timeout)
        for code in self._startup_code:
            await self._run(Cell(code=code, timeout=_STARTUP_TIMEOUT, store_history=False))

    # -- cells -------------------------------------------------------------------------------------

    async def is_alive(self) -> bool:
        """Whether the gateway has the kernel and it is not dead."""
        return self._connection is not None and await self._connection.is_alive()

    async def run_cell(self, cell: Cell) -> ExecutionResult:
        """Run one cell; cells on one kernel run one after another (see `RunsCells.execute`)."""
        async with self._lock:
            if self._connection is None:
                raise KernelError("the kernel is not running")
            notice = ""
            if self.kernel_id is None:  # lost earlier, and the gateway could not give us a new one then
                try:
                    await self._start_remote(self.gateway.start_timeout)
                except KernelError as exc:
                    return ExecutionResult(text=f"The kernel is lost: {exc}\n", status="kernel_died")
                notice = DIED_BEFORE_NOTICE
            elif (news := self._connection.news()) is not None:  # the kernel died since the last cell
                await self._recover(news)
                notice = DIED_BEFORE_NOTICE
            await self._prepare(self.gateway.start_timeout)
            return await self._run(cell, notice)

    async def _run(self, cell: Cell, notice: str = "") -> ExecutionResult:
        """Send the cell and read its output until its `status: idle` (`read_cell`)."""
        connection = self._connection
        assert connection is not None
        content = {"code": cell.code, "silent": False, "store_history": cell.store_history, "user_expressions": {},
                   "allow_stdin": False, "stop_on_error": True}
        request = await connection.send("shell", "execute_request", content)
        hooks = CellHooks(
            receive=connection.receive, state=connection.state, check_every=_LIVENESS_INTERVAL,
            interrupt=self.interrupt, restart=self._restart, recover=self._recover_in_cell, save_png=self._save_image,
            # the gateway's own ways: a broken websocket is reopened, its rate limit's word is not output, and its
            # account of the kernel (idle) ends a cell whose end was lost on the way
            reconnect=self._reconnect, drops_output=_rate_limited, dropped_notice=_RATE_LIMIT_NOTICE,
            lost_end_notice=_LOST_END_NOTICE,
        )
        return await read_cell(hooks, request, cell, notice)

    async def _reconnect(self, lost: KernelLost) -> str | None:
        """Only the websocket broke (the kernel runs on): a new one, and the notice of the gap; else None."""
        assert self._connection is not None
        if lost.state != "closed" or not await self._connection.is_alive():
            return None
        await self._connection.reopen(self.gateway.start_timeout)
        return _GAP_NOTICE

    async def _recover_in_cell(self, lost: KernelLost, running: bool) -> str:
        """After news of a death while a cell ran: a kernel again, and what the cell's output says about it.

        Without a `busy` we cannot tell a request the dead kernel never read from a cell that ended
        its kernel at once (its `busy` dies with the process): the cell is never sent again.
        """
        try:
            await self._recover(lost.state)
        except KernelError as exc:
            return f"\nThe kernel was lost and could not be replaced: {exc}\n"
        return DEATH_NOTICE if running else _DIED_UNSEEN_NOTICE

    def _save_image(self, encoded: str) -> Path:
        self._image_count += 1
        return save_image(self.images_dir, self.label, self._image_count, encoded, working_dir=self.working_dir)

    async def run_at_start(self, code: str, *, wait: bool = True) -> None:
        """Run `code` now and again after every restart, before any other cell (not stored in the history).

        A gateway kernel always runs it now (`wait` is for local kernels).
        """
        async with self._lock:
            if self._connection is None or self.kernel_id is None:
                raise KernelError("the kernel is not running")
            self._startup_code.append(code)
            await self._run(Cell(code=code, timeout=_STARTUP_TIMEOUT, store_history=False))

    async def interrupt(self) -> None:
        """Interrupt the running cell (the gateway's `POST /api/kernels/{id}/interrupt`)."""
        if self._connection is not None:
            await self._connection.interrupt()

    # -- restarts ----------------------------------------------------------------------------------

    async def reset(self) -> None:
        """Restart the kernel with a clean state (waits for a running cell's lock)."""
        async with self._lock:
            await self._restart()
            await self._prepare(self.gateway.start_timeout)

    async def _restart(self) -> None:
        """Restart the kernel through the gateway; start a new one if the gateway lost it."""
        assert self._connection is not None and self.kernel_id is not None
        self.restarts += 1
        self._unprepared = True
        if not await self._connection.restart():
            await self._replace()

    async def _recover(self, state: str = "dead") -> None:
        """After the gateway's news of a death: wait for its restart, or replace a kernel it could not restart."""
        assert self._connection is not None and self.kernel_id is not None
        self.restarts += 1
        self._unprepared = True
        if not await self._connection.recover(state):
            await self._replace()

    async def _replace(self) -> None:
        """A new kernel in place of one the gateway no longer has (or cannot restart)."""
        assert self._connection is not None
        await self._connection.discard()
        await self._start_remote(self.gateway.start_timeout)

    async def shutdown(self, *, now: bool = False) -> None:
        """Close the websocket and delete the kernel on the gateway (a few seconds at most).

        A kernel the gateway cannot be told about (it is down) is left to its idle culling.
        `now` is accepted for symmetry with the local kernel: the gateway decides how it stops.
        """
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()
