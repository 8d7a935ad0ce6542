"""Fast kernel launches: the jupyter_client side of the kernel zygote (see `zygote` and `_kernel_zygote`).

`ForkedProvisioner` is a jupyter_client
kernel provisioner that asks the zygote for a kernel process instead of spawning a new Python;
everything else (connection files, signals, kill, restart) works as with jupyter_client's own
local provisioner, through `ForkedProcess`, which stands in for a `subprocess.Popen`. If the
zygote is not running, the provisioner launches kernels the ordinary way.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from typing import Any

from jupyter_client.provisioning import LocalProvisioner

from .zygote import ZYGOTE_SCRIPT, ForkedProcess, KernelZygote, kernel_environment

__all__ = [
    "KERNEL_LAUNCHER",
    "ZYGOTE_SCRIPT",
    "ForkedProcess",
    "ForkedProvisioner",
    "KernelZygote",
    "kernel_environment",
]

KERNEL_LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ipykernel_launcher.py")
"""The script a launched kernel runs (by path, so the kernel does not import `freeact_sub`)."""

SANDBOX_PLAN_VARIABLE = "FREEACT_SUB_SANDBOX_PLAN"
"""`_ipykernel_launcher.py` (which cannot import this package) reads the sandbox plan from this variable."""


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
        if zygote is not None and zygote.starting:
            # its imports are under way (a tree's first children arrive as it starts): a launch would cost three
            # forks' CPU and take about as long as what is left of them
            with contextlib.suppress(Exception):
                await zygote.start()
        if zygote is None or not zygote.running or not zygote.forks_for(dict(kwargs.get("env") or os.environ)):
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
