"""A kernel for a child that works in a private copy of the folder (a `copy` workspace).

Started for it alone (forked from the tree's zygote when it runs), never pooled: no pooled kernel works in its
copy. Its working folder is the copy; under an enforced sandbox profile the plan is the profile's for the copy,
so the copy is what it may write, never the folder itself.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..kernels.backends import KernelBackend, new_kernel
from ..kernels.launcher import KernelZygote
from ..sandbox import SandboxProfile
from ..workspaces import Workspace

if TYPE_CHECKING:
    from ..config.agent_config import AgentConfig

__all__ = ["start_in_copy"]


async def start_in_copy(
    config: AgentConfig,
    agent_id: str,
    sandbox: SandboxProfile,
    workspace: Workspace,
    launcher: KernelZygote | None = None,
) -> KernelBackend:
    """A started kernel for `agent_id` whose working folder is `workspace`'s copy, confined to `sandbox`; forked
    by `launcher` (the tree's zygote, when it runs), else launched."""
    copy = workspace.upper
    home = config.kernel_env.get("HOME") or os.environ.get("HOME", "")

    def plan(*, fresh: bool = False) -> dict[str, Any]:
        return sandbox.plan(copy, homes=[home])

    in_copy = config.model_copy(update={"working_dir": copy})
    kernel = new_kernel(in_copy, label=agent_id, launcher=launcher, sandbox=plan if sandbox.enforced else None)
    await kernel.start()
    return kernel
