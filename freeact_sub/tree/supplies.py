"""What the agent tree supplies its agents: kernels (launched, or from a pool per sandbox profile, forked by
the process's kernel zygote), pre-opened MCP connections, the generated `mcptools` packages, and shared models."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..code_tools import PackageShelf
from ..errors import ConfigError
from ..kernels.backends import KernelBackend, new_kernel, uses_local_kernels
from ..kernels.local import released
from ..kernels.pool import KernelPool
from ..kernels.zygote import KernelZygote, process_zygote
from ..mcp.pool import McpPool, ToolListings
from ..sandbox import BUILT_IN_PROFILES, SandboxProfile
from ..sandbox.views import copy_on_write_platform_problem
from ..workspaces import Workspace
from .view_kernels import ViewKernels

if TYPE_CHECKING:
    from ..config.agent_config import AgentConfig

__all__ = ["PLAN_FRESHNESS", "Supplies"]

_main_kernels = 0
"""How many main agents' kernels this process has started: from the second on, they are forked by its zygote."""

PLAN_FRESHNESS = 1.0
"""Seconds a sandbox plan's paths (the secrets found, the folders kept read-only) are used before a look again."""


def _with_view(plan: Callable[..., dict[str, Any]], workspace: Workspace, **options: Any) -> dict[str, Any]:
    """`plan`, with the kernel's working folder a copy-on-write view (`sandbox/overlay_mount.py`)."""
    return {**plan(**options), "overlay": workspace.plan()}


class Supplies:
    """The kernels, MCP connections, packages and models of one agent tree (made anew when it closes)."""

    def __init__(self, config: Callable[[], AgentConfig], root_id: str) -> None:
        self._config = config
        self.mcp_listings = ToolListings()
        """The tools each MCP server configuration listed when an agent of the tree first opened it."""
        self.sandbox: SandboxProfile = BUILT_IN_PROFILES["off"]
        """The main agent's sandbox profile; the pool's kernels are confined to it (set when the main agent starts)."""
        self._plans: dict[tuple[SandboxProfile, Path, str], tuple[float, dict[str, Any]]] = {}
        self._models: dict[tuple[str, str | None, str | None], Any] = {}
        """Resolved models by name and connection, shared by the children (`resolve_model`)."""
        self._running = False
        self._warming: asyncio.Task[None] | None = None
        self._root_id = root_id
        self.renew()

    @property
    def config(self) -> AgentConfig:
        """The main agent's config: the kernel settings come from it."""
        return self._config()

    def renew(self) -> None:
        """New (unstarted) pools and packages from the main agent's current config."""
        self._models = {}  # a key read from the environment may have changed since
        self.pool = KernelPool(self._pooled_kernel, self.config.kernel_pool_size)
        """Pre-started, never-used kernels for children."""
        self.profile_pools: dict[SandboxProfile, KernelPool] = {}
        """Pools for children under another profile than the main agent's (a read-only `explore`), made the
        first time such a child starts, so the next one finds its kernel ready."""
        self.view_pools: dict[SandboxProfile, ViewKernels] = {}
        """Kernels each booted in a copy-on-write view of its own, for isolated children, per profile: made when
        the first isolated child is expected or starts (`expect_views`)."""
        self.mcp_pool = McpPool(self.config.mcp_pool_size)
        """Pre-opened, never-used MCP connections for children, per server configuration."""
        self.code_packages = PackageShelf(self._root_id)
        """The generated `mcptools` packages of the tree's agents, one per tool set."""

    @property
    def zygote(self) -> KernelZygote:
        """The kernel zygote of this process, which the tree shares with every other agent the process starts."""
        return process_zygote()

    def new_kernel(
        self, label: str, sandbox: SandboxProfile, *, launcher: KernelZygote | None = None
    ) -> KernelBackend:
        """A kernel (not started) with the tree's settings, confined to `sandbox`: local, or on the kernel gateway."""
        return new_kernel(self.config, label=label, launcher=launcher, sandbox=self.sandbox_plan(sandbox))

    def resolve_model(self, config: AgentConfig) -> Any:
        """The pydantic-ai `Model` `config` names, one per model name and connection for the whole tree.

        Children of one agent type (or any with the same model, `base_url` and key variable) share
        it, and so its provider's HTTP client and open connections, instead of each building its
        own. A `ConfigError` says what is missing or unknown, as `AgentConfig.resolve_model` does.
        """
        if not isinstance(config.model, str):
            return config.resolve_model()
        key = (config.model, config.base_url, config.api_key_env)
        if key not in self._models:
            self._models[key] = config.resolve_model()
        return self._models[key]

    def sandbox_plan(self, profile: SandboxProfile) -> Callable[..., dict[str, Any]] | None:
        """What makes `profile`'s plan for the tree's working folder as absolute paths; None for `off`.

        Each kernel start asks it: the paths are looked up again when the last look is more than
        `PLAN_FRESHNESS` seconds old (a burst of subagents shares one look), and always for a restart
        (`fresh=True`), so a secret made since a kernel started is covered after its next restart at the latest.
        """
        if not profile.enforced or not uses_local_kernels(self.config):
            return None
        return functools.partial(self._plan_now, profile)

    def _plan_now(self, profile: SandboxProfile, *, fresh: bool = False) -> dict[str, Any]:
        home = self.config.kernel_env.get("HOME") or os.environ.get("HOME", "")
        key = (profile, self.config.working_dir, home)
        made, plan = self._plans.get(key, (0.0, None))
        if plan is None or fresh or time.monotonic() - made > PLAN_FRESHNESS:
            project = self.config.working_dir / ".freeact-sub"
            for kept in ("agents", "sessions", "commands"):  # a folder that exists can be covered; else a kernel
                with contextlib.suppress(OSError):  # could make it (where it cannot be made, no kernel can either)
                    (project / kept).mkdir(parents=True, exist_ok=True)
            plan = profile.plan(self.config.working_dir, homes=[home])
            self._plans[key] = (time.monotonic(), plan)
        return plan

    def _pooled_kernel(self) -> KernelBackend:
        return self.new_kernel("pooled", self.sandbox, launcher=self.zygote)

    async def acquire_kernel(
        self, agent_id: str, sandbox: SandboxProfile, *, is_child: bool, workspace: Workspace | None = None
    ) -> KernelBackend:
        """A started kernel for `agent_id` confined to `sandbox`.

        For the main agent, forked by the process's zygote if it runs (or is starting), else launched; for a
        child, from the pool of its profile (the main agent's, or one made when the first child under another
        profile starts). A child with a `workspace` gets a kernel booted ahead in a copy-on-write view of its own
        (`ViewKernels`; one is booted for it if none is ready), whose view's folders become the workspace's.
        """
        if is_child:
            self.warm_up()
        elif uses_local_kernels(self.config):
            await self._zygote_for_main()
        if workspace is not None:
            kernel = await self._views_for(sandbox).acquire(workspace)
            kernel.label = agent_id
            return kernel
        if is_child and sandbox == self.sandbox:
            kernel = await self.pool.acquire()
        elif is_child and uses_local_kernels(self.config):
            pool = self.profile_pools.get(sandbox)
            if pool is None:
                pool = self.profile_pools[sandbox] = KernelPool(
                    lambda: self.new_kernel("pooled", sandbox, launcher=self.zygote), self.config.kernel_pool_size
                )
            kernel = await pool.acquire()
        else:
            kernel = self.new_kernel(agent_id, sandbox, launcher=self.zygote)  # launched if it does not run
            await kernel.start()
        kernel.label = agent_id
        return kernel

    def _views_for(self, sandbox: SandboxProfile) -> ViewKernels:
        """The pool of kernels booted in views of their own under `sandbox` (made now if there is none)."""
        views = self.view_pools.get(sandbox)
        if views is None:
            plan = self.sandbox_plan(sandbox)
            if plan is None:
                raise ConfigError("isolation: copy-on-write needs a local kernel under an enforced sandbox profile")

            def make(view: Workspace) -> KernelBackend:
                return new_kernel(self.config, label="pooled", launcher=self.zygote,
                                  sandbox=functools.partial(_with_view, plan, view))

            lower = Path(os.path.realpath(self.config.working_dir))
            views = self.view_pools[sandbox] = ViewKernels(make, lower, self.config.kernel_pool_size)
        return views

    def expect_views(self, sandbox: SandboxProfile, callers: int) -> None:
        """`callers` isolated children under `sandbox` will start soon (their `task` calls were announced): their
        kernels boot in views of their own meanwhile, as the pool's do for plain children. Nothing where no view
        can be had (no enforced profile, a gateway): those children get a private copy, made when they start."""
        if not self._running or self.config.isolation_copy or self.sandbox_plan(sandbox) is None:
            return
        if callers <= 0 and sandbox not in self.view_pools:
            return  # none made, none wanted
        if copy_on_write_platform_problem() is not None:
            return
        self.warm_up()
        self._views_for(sandbox).expect(min(callers, self.config.max_subagents))

    def mcp_pool_for(self, is_child: bool) -> McpPool | None:
        """Where an agent takes its MCP connections from: the pool for a child, none for the main agent."""
        return self.mcp_pool if is_child else None

    def top_up(self, config: AgentConfig) -> None:
        """Top the pools of other profiles and the MCP pool up (the main pool tops itself up as it is expected)."""
        if self._warming is None:
            return
        for pool in self.profile_pools.values():
            pool.fill()
        for views in self.view_pools.values():
            views.fill()
        self.mcp_pool.fill(config.mcp_servers, config.working_dir)

    def expect(
        self,
        waiting: dict[SandboxProfile, int],
        announced: int,
        *,
        views: dict[SandboxProfile, int] | None = None,
        announced_views: int = 0,
    ) -> None:
        """Tell each kernel pool how many children will take one of its kernels soon (`waiting` per profile, and
        `announced` ones under the main agent's), up to `max_subagents`: their kernels boot meanwhile. `views` and
        `announced_views` count the isolated ones the same way: their kernels boot in views of their own."""
        views = views or {}
        if not any(waiting.values()) and not announced and not any(views.values()) and not announced_views \
                and self._warming is None:
            return  # nothing is coming: the supplies stay cold
        self.warm_up()
        limit = self.config.max_subagents
        self.pool.expect(min(waiting.get(self.sandbox, 0) + announced, limit))
        for profile, pool in self.profile_pools.items():
            pool.expect(min(waiting.get(profile, 0), limit))
        for profile in {*views, *self.view_pools, *([self.sandbox] if announced_views else [])}:
            self.expect_views(profile, views.get(profile, 0) + (announced_views if profile == self.sandbox else 0))

    @property
    def running(self) -> bool:
        """Whether the main agent has started them (`start()`) and not closed them since."""
        return self._running

    @property
    def warmed(self) -> bool:
        """Whether the zygote and the pools have been started (they start when the first subagent is near)."""
        return self._warming is not None

    def start(self) -> None:
        """The main agent has started: from now on the supplies may be warmed. They start cold, so a run that
        starts no subagent starts no zygote, no spare kernel and no spare MCP server; `warm_up()` (the first
        subagent announced, registered or given a kernel; or `prestart_pools`) starts them."""
        if not self._running:
            self.renew()  # nothing has used them yet; the config may have changed since they were made
            self._running = True
            if self.config.prestart_pools:
                self.warm_up()

    async def _zygote_for_main(self) -> None:
        """Start the process's zygote for the second main agent's kernel this process starts (a notebook, a program
        or a test run that starts agents one after another) and wait for it, as for one already starting: a fork
        costs a fraction of a launch, and the zygote is ready about as soon as a launched kernel would be. The
        first main agent (a one-shot) starts none. A zygote that fails to start leaves kernels to be launched."""
        global _main_kernels
        _main_kernels += 1
        zygote = self.zygote
        if zygote.running or (zygote.pid is None and _main_kernels < 2):
            return
        with contextlib.suppress(Exception):
            await zygote.start()

    def warm_up(self) -> None:
        """In the background: open the MCP pool's connections; start the kernel zygote, then fill the kernel pool.
        Once per start; nothing before the main agent has started (nobody would stop them)."""
        if self._running and self._warming is None:
            self.mcp_pool.fill(self.config.mcp_servers, self.config.working_dir)
            self._warming = asyncio.create_task(self._warm_up(), name="agent-tree-warm-up")

    async def _warm_up(self) -> None:
        if uses_local_kernels(self.config):
            with contextlib.suppress(Exception):  # without a zygote, kernels are launched the ordinary way
                await self.zygote.start()
        self.pool.fill()

    async def close(self) -> None:
        """Stop the warm-up, shut the pools and packages down (children are stopped by their parents).

        The process's zygote stays for the next agent (`close_process_zygote()` stops it)."""
        if self._warming is not None and not self._warming.done():
            self._warming.cancel()
            with contextlib.suppress(BaseException):
                await self._warming
        self._warming, self._running = None, False
        pool, mcp_pool, others = self.pool, self.mcp_pool, list(self.profile_pools.values())
        views = list(self.view_pools.values())
        packages = self.code_packages
        self.renew()  # a main agent may be started again after it stopped
        await asyncio.gather(
            pool.close(), mcp_pool.close(), packages.close(), *(p.close() for p in others),
            *(v.close() for v in views), return_exceptions=True,
        )
        await released()  # what the tree's killed kernels held (children's, pools' surplus) is let go by now
