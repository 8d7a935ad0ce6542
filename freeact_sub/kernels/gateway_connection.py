"""`GatewayConnection`: one kernel on a gateway as a connection, for `GatewayKernel`.

It owns the gateway's REST API, the kernel's id and the websocket to its channels: it starts the
kernel (a start cut short is deleted all the same), opens a websocket once the kernel answers on
it, hands out what arrives, asks the gateway how the kernel is, interrupts, restarts and deletes
it. The gateway's news of a death (an iopub `status: restarting` or `dead` with no parent) and a
closed websocket are raised as `KernelLost`. Running cells is `GatewayKernel`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import KernelError
from ._gateway_client import Closed, GatewayApi, KernelChannels
from .cell_reader import BATCH, KernelLost
from .messages import Message, checked

if TYPE_CHECKING:
    from ..config.agent_config import KernelGatewayConfig

__all__ = ["GatewayConnection"]

_CUT_SHORT_WAIT = 10.0


class GatewayConnection:
    """The REST API, the kernel id and the websocket of one kernel on `gateway`; `close()` deletes the kernel."""

    def __init__(self, gateway: KernelGatewayConfig, env: Mapping[str, str]) -> None:
        self.gateway = gateway
        self._env = dict(env)
        """What every kernel start sends as the kernel's environment."""
        self.api = GatewayApi(
            gateway.url,
            gateway.headers(),
            token_env=gateway.token_env,
            request_timeout=gateway.request_timeout,
            validate_cert=gateway.validate_cert,
        )
        self.kernel_id: str | None = None
        """The gateway's id of the kernel while it runs."""
        self._channels: KernelChannels | None = None
        self._held: dict[str, Any] | Closed | None = None
        """A message read ahead of its turn (news of a restart or a closed websocket), delivered next."""

    @property
    def url(self) -> str:
        return self.gateway.url

    async def start(self, timeout: float) -> None:
        """Start a kernel on the gateway and connect to it once it answers."""
        deadline = time.monotonic() + timeout
        wanted = str(uuid.uuid4())
        self.kernel_id = wanted  # known before the request: a start cut short is deleted all the same
        post = asyncio.ensure_future(self.api.start_kernel(self.gateway.kernel_name, self._env, timeout, wanted))
        try:
            self.kernel_id = await asyncio.shield(post)
        except asyncio.CancelledError:
            # the gateway goes on starting the kernel: wait a little for it, so that it can be deleted now
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(post), _CUT_SHORT_WAIT)
            if post.done() and not post.cancelled() and post.exception() is None:
                self.kernel_id = post.result()
            raise
        await self.connect(max(1.0, deadline - time.monotonic()))

    async def connect(self, timeout: float) -> None:
        """A new websocket to the kernel in place of the current one, once the kernel answers on it.

        Also after the gateway's `restarting` news: the old websocket is closed at once. A gateway
        that restarts a kernel on new ports (it does so for a kernel that dies soon after it
        started) leaves it connected to the old ports; and a request still queued on it could
        reach the restarted kernel while it starts up.
        """
        await self.reopen(timeout)
        await self.wait_until_ready(timeout)

    async def reopen(self, timeout: float) -> None:
        """A new websocket to the kernel in place of the current one (closed, with what it still held)."""
        assert self.kernel_id is not None
        channels = KernelChannels(self.api, self.kernel_id)
        await channels.open(timeout)
        old, self._channels = self._channels, channels
        self._held = None
        if old is not None:
            await old.close()

    async def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        """Send one request on the kernel's websocket; its message id."""
        assert self._channels is not None
        return await self._channels.send(channel, msg_type, content)

    async def run_silently(self, code: str, timeout: float) -> bool:
        """Run setup code that leaves no trace in the kernel's history; whether it ran without error.

        Raises `TimeoutError` if it did not end within `timeout`, `KernelLost` on news of a death.
        """
        content = {"code": code, "silent": True, "store_history": False, "user_expressions": {},
                   "allow_stdin": False, "stop_on_error": False}
        msg_id = await self.send("shell", "execute_request", content)
        deadline = time.monotonic() + timeout
        failed = False
        while time.monotonic() < deadline:
            message = await self.next(max(0.0, deadline - time.monotonic()))
            if message is None or message["parent_header"].get("msg_id") != msg_id:
                continue
            failed = failed or message.get("msg_type") == "error"
            if message.get("msg_type") == "status" and message.get("content", {}).get("execution_state") == "idle":
                return not failed
        return False

    async def wait_until_ready(self, timeout: float) -> None:
        """Wait until the kernel answers `kernel_info` on the shell channel and its iopub messages reach us."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            request = await self.send("shell", "kernel_info_request", {})
            replied = iopub_seen = False
            round_end = min(deadline, time.monotonic() + 2.0)
            while time.monotonic() < round_end and not (replied and iopub_seen):
                try:
                    message = await self.next(max(0.0, round_end - time.monotonic()))
                except TimeoutError:
                    break
                except KernelLost as lost:
                    if lost.state == "dead":
                        raise KernelError(f"kernel gateway {self.url}: the kernel died and could not be restarted") \
                            from None
                    continue
                if message is None or message["parent_header"].get("msg_id") != request:
                    continue
                replied = replied or message.get("channel") == "shell"
                iopub_seen = iopub_seen or message.get("channel") == "iopub"
            if replied and iopub_seen:
                return
        raise KernelError(f"kernel gateway {self.url}: the kernel did not answer within {timeout:g} s")

    async def next(self, wait: float) -> Message | None:
        """The next message within `wait` s (`TimeoutError` if none); raises `KernelLost` for the gateway's news."""
        assert self._channels is not None
        item: dict[str, Any] | Closed | None
        if self._held is not None:
            item, self._held = self._held, None
            return self._checked(item)
        try:
            item = await asyncio.wait_for(self._channels.messages.get(), wait) if wait > 0 else \
                self._channels.messages.get_nowait()
        except asyncio.QueueEmpty:
            raise TimeoutError from None
        return self._checked(item)

    async def receive(self, wait: float) -> list[Message | None]:
        """The next message (waiting up to `wait` s) and every message already queued behind it."""
        batch: list[Message | None] = [await self.next(wait)]
        assert self._channels is not None
        queue = self._channels.messages
        while len(batch) < BATCH and not queue.empty():
            item = queue.get_nowait()
            try:
                batch.append(self._checked(item))
            except KernelLost:
                self._held = item  # the news comes with the next read, after this batch's output
                break
        return batch

    def news(self) -> str | None:
        """Read what arrived between cells: the state of a death it reports (`restarting`, `dead`, `closed`), if any.

        News other than `restarting` is final and returned at once; `restarting` only once nothing else follows.
        """
        assert self._channels is not None
        died = None
        while True:
            try:
                self._checked(self._channels.messages.get_nowait())
            except asyncio.QueueEmpty:
                return died
            except KernelLost as lost:
                if lost.state != "restarting":
                    return lost.state
                died = lost.state

    @staticmethod
    def _checked(item: dict[str, Any] | Closed | None) -> Message | None:
        if isinstance(item, Closed):
            raise KernelLost("closed")
        message = checked(item)  # the gateway's own word on a death comes as a status without a parent
        if (
            message is not None
            and message["msg_type"] == "status"
            and not message["parent_header"]
            and message["content"]["execution_state"] in ("restarting", "dead")
        ):
            raise KernelLost(message["content"]["execution_state"])
        return message

    async def is_alive(self) -> bool:
        """Whether the gateway has the kernel and it is not dead."""
        return await self.state() not in (None, "dead")

    async def state(self) -> str | None:
        """The kernel's execution state by the gateway's account; None if it has no such kernel or is unreachable."""
        if self.kernel_id is None:
            return None
        try:
            model = await self.api.kernel(self.kernel_id)
        except KernelError:
            return None
        return None if model is None else str(model.get("execution_state"))

    async def interrupt(self) -> None:
        """Interrupt the running cell (the gateway's `POST /api/kernels/{id}/interrupt`)."""
        if self.kernel_id is not None:
            with contextlib.suppress(KernelError):
                await self.api.interrupt(self.kernel_id)

    async def restart(self) -> bool:
        """Restart the kernel through the gateway and wait until it answers; False if the gateway no longer has it."""
        assert self.kernel_id is not None
        if not await self.api.restart(self.kernel_id, self.gateway.start_timeout):
            return False
        await self.wait_until_ready(self.gateway.start_timeout)
        return True

    async def recover(self, state: str) -> bool:
        """After news of a death: connect to the kernel the gateway restarted, or to one only the connection lost.

        False: the kernel is gone for good (`dead`, or gone from the gateway) and needs replacing.
        """
        assert self.kernel_id is not None
        if state == "restarting" or (state == "closed" and await self.is_alive()):
            await self.connect(self.gateway.start_timeout)
            return True
        return False

    async def discard(self) -> None:
        """Delete the kernel (one the gateway no longer has, or cannot restart); a new `start()` may follow."""
        old, self.kernel_id = self.kernel_id, None
        if old is not None:
            with contextlib.suppress(KernelError):
                await self.api.delete(old, timeout=5.0)

    async def close(self) -> None:
        """Close the websocket and delete the kernel on the gateway (a few seconds at most)."""
        kernel_id, self.kernel_id = self.kernel_id, None
        channels, self._channels = self._channels, None
        api = self.api

        async def stop() -> None:
            if channels is not None:
                await channels.close()
            try:
                if kernel_id is not None:
                    with contextlib.suppress(KernelError):
                        await api.delete(kernel_id, timeout=5.0)
            finally:
                await api.aclose()

        await asyncio.shield(stop())
