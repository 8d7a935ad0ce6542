"""The kernel backends behind one interface: `Kernel` (local, the default) and `GatewayKernel`.

The agent, its tool calls and the kernel pool use only `KernelBackend` (`PendingKernel` is one
too); `new_kernel` picks the backend from the config (`kernel_gateway` set: the gateway; else a
local kernel, forked by the tree's zygote when there is one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .cells import RunsCells
from .local import Kernel

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ..config.agent_config import AgentConfig
    from .launcher import KernelZygote

__all__ = ["KernelBackend", "new_kernel", "uses_local_kernels"]


class KernelBackend(RunsCells, Protocol):
    """What every kernel backend does (see `Kernel` for the behaviour each method promises); `execute`,
    `run_cell`, `start`, `shutdown` and `async with` come from `RunsCells`."""

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

    async def run_at_start(self, code: str, *, wait: bool = True) -> None:
        """Run `code` now and again after every restart, before any other cell (not stored in the history).

        `wait=False`: the kernel may instead send it just before the next cell, without a round trip of its own.
        """
        ...

    async def is_alive(self) -> bool: ...

    async def interrupt(self) -> None: ...

    async def reset(self) -> None: ...


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
