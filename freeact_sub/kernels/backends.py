"""The kernel backends behind one interface: `Kernel` (local, the default) and `GatewayKernel`.

The agent, its tool calls and the kernel pool use only `KernelBackend`; `new_kernel` picks the
backend from the config (`kernel_gateway` set: the gateway; else a local kernel, forked by the
tree's zygote when there is one).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .cell_run import OutputCallback
from .local import ExecutionResult, Kernel

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ..config.agent_config import AgentConfig
    from .launcher import KernelZygote

__all__ = ["KernelBackend", "PendingKernel", "new_kernel", "uses_local_kernels"]


class KernelBackend(Protocol):
    """What every kernel backend does (see `Kernel` for the behaviour each method promises)."""

    label: str
    """Prefix of saved image files; the agent sets its id here."""

    @property
    def restarts(self) -> int:
        """How often the kernel was restarted (after a death, a stuck interrupt or `reset()`)."""
        ...

    @property
    def images_dir(self) -> Path:
        """Where the `image/png` outputs of cells are saved, on this machine."""
        ...

    @property
    def started(self) -> bool: ...

    @property
    def pid(self) -> int | None:
        """The kernel's process id on this machine (None for a kernel elsewhere)."""
        ...

    @property
    def tools_socket(self) -> str | None:
        """Where the kernel listens for its agent's code-tools channel (None: not yet, or not on this machine)."""
        ...

    async def start(self, timeout: float = ...) -> None: ...

    async def execute(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        paused: Callable[[], float] | None = None,
        store_history: bool = True,
    ) -> ExecutionResult: ...

    async def run_at_start(self, code: str, *, wait: bool = True) -> None:
        """Run `code` now and again after every restart, before any other cell (not stored in the history).

        `wait=False`: the kernel may instead send it just before the next cell, without a round trip of its own.
        """
        ...

    async def is_alive(self) -> bool: ...

    async def interrupt(self) -> None: ...

    async def reset(self) -> None: ...

    async def shutdown(self, *, now: bool = False) -> None: ...


class PendingKernel:
    """A kernel still being acquired (booted, or taken from a pool) in the background; each use waits for it.

    A subagent needs its kernel only for its first cell, so it starts its first model request while
    the kernel boots rather than after. A kernel that cannot be had raises its `KernelError` at the
    first use; `shutdown()` stops an acquisition still under way, or the kernel it brought.
    """

    def __init__(self, acquire: Awaitable[KernelBackend], *, label: str, images_dir: Path) -> None:
        self._acquiring: asyncio.Future[KernelBackend] = asyncio.ensure_future(acquire)
        self._label = label
        self._images_dir = images_dir
        self._waited = 0.0
        """Seconds callers waited for the kernel, not yet reported with a cell (`ExecutionResult.kernel_wait`)."""

    def _kernel(self) -> KernelBackend | None:
        """The kernel, once it is there."""
        done = self._acquiring.done() and not self._acquiring.cancelled() and self._acquiring.exception() is None
        return self._acquiring.result() if done else None

    async def _ready(self) -> KernelBackend:
        if self._acquiring.done():
            return self._acquiring.result()
        began = time.monotonic()
        try:
            # Shielded: a cancelled cell does not cancel the acquisition, which belongs to the agent (see shutdown).
            return await asyncio.shield(self._acquiring)
        finally:
            self._waited += time.monotonic() - began

    @property
    def label(self) -> str:
        kernel = self._kernel()
        return kernel.label if kernel is not None else self._label

    @label.setter
    def label(self, value: str) -> None:
        self._label = value
        if (kernel := self._kernel()) is not None:
            kernel.label = value

    @property
    def restarts(self) -> int:
        kernel = self._kernel()
        return kernel.restarts if kernel is not None else 0

    @property
    def images_dir(self) -> Path:
        kernel = self._kernel()
        return kernel.images_dir if kernel is not None else self._images_dir

    @property
    def started(self) -> bool:
        kernel = self._kernel()
        return kernel is not None and kernel.started

    @property
    def pid(self) -> int | None:
        kernel = self._kernel()
        return kernel.pid if kernel is not None else None

    @property
    def tools_socket(self) -> str | None:
        kernel = self._kernel()
        return kernel.tools_socket if kernel is not None else None

    async def start(self, timeout: float = 60.0) -> None:
        await self._ready()

    async def execute(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        paused: Callable[[], float] | None = None,
        store_history: bool = True,
    ) -> ExecutionResult:
        kernel = await self._ready()
        result = await kernel.execute(
            code, timeout=timeout, on_output=on_output, paused=paused, store_history=store_history
        )
        result.kernel_wait, self._waited = result.kernel_wait + self._waited, 0.0
        return result

    async def run_at_start(self, code: str, *, wait: bool = True) -> None:
        await (await self._ready()).run_at_start(code, wait=wait)

    async def is_alive(self) -> bool:
        if not self._acquiring.done():
            return True  # on its way
        kernel = self._kernel()
        return kernel is not None and await kernel.is_alive()

    async def interrupt(self) -> None:
        if (kernel := self._kernel()) is not None:
            await kernel.interrupt()

    async def reset(self) -> None:
        await (await self._ready()).reset()

    async def shutdown(self, *, now: bool = False) -> None:
        self._acquiring.cancel()  # no-op once it is done
        await asyncio.gather(self._acquiring, return_exceptions=True)  # (a failed acquisition's error is read here)
        if (kernel := self._kernel()) is not None:
            await kernel.shutdown(now=now)


def uses_local_kernels(config: AgentConfig) -> bool:
    """Whether kernels run on this machine (so a zygote can fork them and code tools can reach them)."""
    return config.kernel_gateway is None


def new_kernel(
    config: AgentConfig,
    *,
    label: str,
    launcher: KernelZygote | None = None,
    sandbox: Mapping[str, Any] | Callable[..., Mapping[str, Any]] | None = None,
) -> KernelBackend:
    """A kernel (not started) for an agent with `config`: on the configured gateway, or local.

    `sandbox` is the plan (`SandboxProfile.plan`) a local kernel is confined to, or what makes it at each start;
    a gateway kernel
    never gets one (the effective profile of a gateway tree is `off`).
    """
    if config.kernel_gateway is not None:
        from .gateway import GatewayKernel  # imports httpx and websockets only when needed

        return GatewayKernel(
            config.kernel_gateway,
            env=config.kernel_env,
            images_dir=config.resolved_images_dir,
            working_dir=config.working_dir,
            label=label,
        )
    return Kernel(
        working_dir=config.working_dir,
        env=config.kernel_env,
        images_dir=config.resolved_images_dir,
        label=label,
        launcher=launcher,
        sandbox=sandbox,
    )
