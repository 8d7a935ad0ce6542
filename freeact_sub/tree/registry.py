"""`AgentTree`: what a main agent and every subagent under it share.

One tree per main agent. It holds the approval policy, the subagent bound (`max_subagents`,
counted across the whole tree), the kernel zygote and the kernel pool that children's kernels
come from, the pool of pre-opened MCP connections children take theirs from, the usage
ledger, and the registry of the agents alive in it (id, parent, type, description). It builds
children through a factory the main agent hands it, so the module that runs `task` calls
(`subagents.py`) needs neither the `Agent` class nor any agent's private state.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..code_tools import PackageShelf
from ..kernels.backends import KernelBackend, new_kernel, uses_local_kernels
from ..kernels.launcher import KernelZygote
from ..kernels.pool import KernelPool
from ..mcp.pool import McpPool, ToolListings
from ..models.retries import RequestSlots
from ..policy.hooks import Hooks
from ..sandbox import BUILT_IN_PROFILES, SandboxProfile
from ..tools.names import tool_allowed
from ..usage import UsageLedger

PLAN_FRESHNESS = 1.0
"""Seconds a sandbox plan's paths (the secrets found, the folders kept read-only) are used before a look again."""

if TYPE_CHECKING:
    from ..config.agent_config import AgentConfig
    from ..config.definitions import AgentDefinition
    from ..events import AgentEvent
    from ..policy.approvals import ApprovalPolicy

__all__ = [
    "AgentFactory", "AgentRecord", "AgentTree", "BackgroundEvents", "ChildSpec", "SubagentInfo", "TreeMember",
]


class TreeMember(Protocol):
    """What the tree and the `task` runner need of an agent."""

    agent_id: str
    config: AgentConfig
    turns_used: int
    turn_limit_reached: bool
    last_turn_rejected: bool

    @property
    def settings(self) -> AgentConfig:
        """What the agent runs with: its config with its agent type applied."""
        ...

    @property
    def sandbox(self) -> SandboxProfile:
        """The sandbox profile the agent's kernel runs under."""
        ...

    @property
    def hooks(self) -> Hooks:
        """The hooks that apply to this agent (the config's and its type's)."""
        ...

    def hook_context(self) -> dict[str, Any]:
        """The fields every hook payload about this agent has (`agent_id`, `parent_id`, `subagent_type`, …)."""
        ...

    @property
    def model(self) -> Any:
        """The resolved pydantic-ai `Model` (after `start()`)."""
        ...

    @property
    def history(self) -> list[Any]:
        """A copy of the conversation so far."""
        ...

    async def start(self) -> None: ...

    def cancel(self) -> None: ...

    def stream(self, prompt: str, max_turns: int | None = None) -> AsyncGenerator[AgentEvent, None]: ...

    def tell(self, text: str, sender: str) -> None:
        """Queue a message for the agent's next model request (`sender`: who sent it, as the model reads it)."""
        ...

    def drop_unread(self) -> int:
        """Forget the messages it has not read (it ended); returns how many there were."""
        ...

    def take_report(self, child_id: str, text: str) -> None:
        """A running child's `task_report`: the agent's model reads it at its next model request."""
        ...

    async def stop(self) -> None: ...

    def finished(self, status: str) -> None:
        """Record how the agent ended (in its session, if it saves one)."""
        ...

    def saved_subagent(self, agent_id: str) -> list[Any] | None:
        """The saved conversation of a subagent it started (in its session, from an earlier process too), or None."""
        ...

    def saved_subagents(self) -> list[Any]:
        """What its session says of each subagent it started (`SavedAgent`s, earlier processes' too)."""
        ...


@dataclass(frozen=True, kw_only=True)
class ChildSpec:
    """What a child is built from."""

    config: AgentConfig
    """The child's own config (model resolved, no `task` tool)."""
    parent_id: str
    tool_call_id: str
    """The parent's `task` call that starts it."""
    prompt: str
    subagent_type: str
    definition: AgentDefinition
    """The child's type."""
    description: str = ""
    agent_id: str | None = None
    """The id to run under (a resumed child keeps its id); None for a new one."""
    history: list[Any] | None = None
    """The conversation the child continues (resume) or starts from (fork); None for an empty one."""
    note: str | None = None
    """Told to the model with the first prompt (e.g. that the kernel is new)."""
    max_tokens: int | None = None
    """Budget: input plus output tokens over the child's life."""
    max_tool_calls: int | None = None
    """Budget: tool calls over the child's life."""
    max_cost: float | None = None
    """Budget: USD over the child's life (its model's price is known)."""
    sandbox: SandboxProfile = field(default_factory=lambda: BUILT_IN_PROFILES["off"])
    """The sandbox profile the child's kernel runs under (its parent's, narrowed by its type)."""


AgentFactory = Callable[["AgentTree", ChildSpec], TreeMember]
"""Builds a child of `spec.parent_id` that joins `tree` (the main agent's module supplies it)."""


@dataclass
class AgentRecord:
    """One live agent of a tree."""

    agent_id: str
    parent_id: str | None
    """None for the main agent."""
    subagent_type: str
    """The agent type it runs as (`general` unless a type was named)."""
    description: str
    """The short title its `task` call gave it (empty for the main agent)."""
    agent: TreeMember
    started_at: float = field(default_factory=time.monotonic)
    background: bool = False
    """Whether it was started with `run_in_background`."""
    state: str = "waiting"
    """`waiting` (for a slot), `starting`, `running`; a record is removed when its agent ends."""
    task: asyncio.Task[Any] | None = None
    """The task that drives the child (cancelled to stop it)."""
    stopped_by: str | None = None
    """Who stopped it before it finished: `the user` or `its parent`."""
    prompt: str = ""
    """The job its `task` call gave it."""
    runs_code: bool | None = None
    """Whether its type lets it run cells (so it takes a kernel); worked out once, when first asked."""


@dataclass(frozen=True, kw_only=True)
class SubagentInfo:
    """One live subagent, as `Agent.subagents()` lists it."""

    agent_id: str
    parent_id: str
    subagent_type: str
    description: str
    prompt: str
    state: str
    """`waiting` for a slot, `starting`, `running`, or `waiting for approval` (a person has a question of it)."""
    background: bool
    turns: int
    """Model rounds so far."""
    elapsed: float
    """Seconds since its `task` call."""
    input_tokens: int
    output_tokens: int
    cost: Decimal | None
    """USD, None if its model's price is unknown."""


class BackgroundEvents:
    """Carries the events of background subagents to the consumer, in or out of a turn.

    While a `stream()` of the main agent runs, its events join that stream; between turns they
    wait here for `Agent.background_events()`. Nothing is dropped and nothing is decided here.
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        self._sink: Callable[[AgentEvent], None] | None = None

    def emit(self, event: AgentEvent) -> None:
        if self._sink is not None:
            self._sink(event)
        else:
            self._queue.put_nowait(event)

    def attach(self, sink: Callable[[AgentEvent], None]) -> None:
        """A turn begins: what waits here (unread) goes into it first, then every new event."""
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None:
                sink(item)
        self._sink = sink

    def detach(self) -> None:
        self._sink = None

    async def iterate(self) -> AsyncIterator[AgentEvent]:
        """Yield the events that arrive between turns, until `close()`."""
        while (item := await self._queue.get()) is not None:
            yield item

    def close(self) -> None:
        """End every `iterate()` loop."""
        self._queue.put_nowait(None)


class AgentTree:
    """The shared state of one agent tree; created by the main agent, closed when it stops."""

    def __init__(self, root: TreeMember, *, approvals: ApprovalPolicy, factory: AgentFactory) -> None:
        self.root = root
        """The main agent."""
        self.approvals = approvals
        """Standing decisions, shared by every agent of the tree."""
        self.agents: dict[str, AgentRecord] = {}
        """The live agents by id, the main agent included."""
        self.types: dict[str, AgentDefinition] = {}
        """The agent types by name (built-in, files, config), loaded when the main agent starts."""
        self.usage = UsageLedger()
        """Token usage and cost of every agent of the tree, by agent id."""
        self.background = BackgroundEvents()
        """Where background subagents' events go (into the running turn, or to `Agent.background_events()`)."""
        self._factory = factory
        self._warming: asyncio.Task[None] | None = None
        self.hooks = Hooks()
        """The config's hooks (set when the main agent starts); each agent adds its type's own."""
        self.mcp_listings = ToolListings()
        """The tools each MCP server configuration listed when an agent of the tree first opened it."""
        self.sandbox: SandboxProfile = BUILT_IN_PROFILES["off"]
        """The main agent's sandbox profile; the pool's kernels are confined to it (set when the main agent starts)."""
        self._plans: dict[tuple[SandboxProfile, Path, str], tuple[float, dict[str, Any]]] = {}
        self._models: dict[tuple[str, str | None, str | None], Any] = {}
        """Resolved models by name and connection, shared by the children (`resolve_model`)."""
        self._announced: set[tuple[str, str]] = set()
        """`task` calls of a model response (by parent and call id) whose children will take a kernel from the main
        pool and are not registered yet (`announce`)."""
        self._renew()

    def _renew(self) -> None:
        """New (unstarted) bound, zygote and pool from the main agent's current config."""
        self._models = {}  # a key read from the environment may have changed since
        self.bound = asyncio.Semaphore(self.config.max_subagents)
        """At most `max_subagents` children exist at once, across the tree: a child takes a slot before its kernel
        exists and gives it back when its kernel is gone (its session record, events and hooks come after)."""
        self.model_requests = RequestSlots(self.config.max_model_requests)
        """At most `max_model_requests` model requests of the tree in flight at once (a retry's wait holds none)."""
        self.zygote = KernelZygote()
        self.pool = KernelPool(self._pooled_kernel, self.config.kernel_pool_size)
        """Pre-started, never-used kernels for children."""
        self.profile_pools: dict[SandboxProfile, KernelPool] = {}
        """Pools for children under another profile than the main agent's (a read-only `explore`), made the
        first time such a child starts, so the next one finds its kernel ready."""
        self.mcp_pool = McpPool(self.config.mcp_pool_size)
        """Pre-opened, never-used MCP connections for children, per server configuration."""
        self.code_packages = PackageShelf(self.root.agent_id)
        """The generated `mcptools` packages of the tree's agents, one per tool set."""

    @property
    def config(self) -> AgentConfig:
        """The main agent's config: the kernel settings and the bound of the whole tree come from it."""
        return self.root.config

    # -- the registry ------------------------------------------------------------------------

    def register(
        self, agent: TreeMember, *, parent_id: str | None, subagent_type: str = "general", description: str = ""
    ) -> AgentRecord:
        """Add a live agent to the registry."""
        record = AgentRecord(agent.agent_id, parent_id, subagent_type, description, agent)
        self.agents[agent.agent_id] = record
        return record

    def unregister(self, agent_id: str) -> None:
        """Remove an agent that ended."""
        if self.agents.pop(agent_id, None) is not None:
            self._expect_children()

    def children(self, parent_id: str) -> list[AgentRecord]:
        """The live children of `parent_id`."""
        return [record for record in self.agents.values() if record.parent_id == parent_id]

    def depth(self, agent_id: str) -> int:
        """0 for the main agent, 1 for its children, 2 for theirs, …"""
        depth, record = 0, self.agents.get(agent_id)
        while record is not None and record.parent_id is not None:
            depth += 1
            record = self.agents.get(record.parent_id)
        return depth

    def send(self, agent_id: str, text: str) -> None:
        """The person's message to a running subagent (at any depth): it reads it at its next model request.

        Raises `ValueError` for an empty message or an id that is no running subagent.
        """
        from ..events import SubagentMessage

        if not text.strip():
            raise ValueError("the message is empty")
        record = self.agents.get(agent_id)
        if record is None or record.parent_id is None:
            raise ValueError(
                f"no running subagent {agent_id!r}: a message reaches only a subagent that is running "
                "(one that has ended can be resumed by its parent with `task(resume=...)`)"
            )
        record.agent.tell(text, "the user")
        self.background.emit(SubagentMessage(agent_id=record.parent_id, subagent_id=agent_id, text=text,
                                              sender="user"))

    def cancel(self, agent_id: str, by: str = "the user") -> bool:
        """Stop one subagent (at any depth): its parent's `task` result says who stopped it. False if not live."""
        record = self.agents.get(agent_id)
        if record is None or record.parent_id is None or record.task is None or record.task.done():
            return False
        record.stopped_by = record.stopped_by or by
        record.task.cancel()
        return True

    def subagents(self) -> list[SubagentInfo]:
        """Every live subagent of the tree, oldest first."""
        now = time.monotonic()
        infos = []
        for record in self.agents.values():
            if record.parent_id is None:
                continue
            used = self.usage.of(record.agent_id)
            infos.append(SubagentInfo(
                agent_id=record.agent_id, parent_id=record.parent_id, subagent_type=record.subagent_type,
                description=record.description, prompt=record.prompt,
                state="waiting for approval" if self.approvals.waits(record.agent_id) else record.state,
                background=record.background, turns=record.agent.turns_used, elapsed=now - record.started_at,
                input_tokens=used.input_tokens, output_tokens=used.output_tokens, cost=used.cost,
            ))
        return infos

    def slot_never_frees(self, parent_id: str) -> bool:
        """Whether a new foreground child of `parent_id` could wait for a slot forever.

        A subagent holds its slot until its turn ends, and its turn cannot end while one of its
        foreground `task` calls waits. So when every slot is held and every holder waits on a
        foreground child of its own (`parent_id` counts as one, it is about to), no holder can
        ever release its slot: every waiter, this new one included, would wait forever.
        """
        holders = [r for r in self.agents.values() if r.parent_id is not None and r.state in ("starting", "running")]
        if len(holders) < self.config.max_subagents:
            return False  # a slot is free, or is being released by a child that ended
        waiting_on_children = {
            r.parent_id for r in self.agents.values() if r.parent_id is not None and not r.background
        } | {parent_id}
        return all(holder.agent_id in waiting_on_children for holder in holders)

    def is_child(self, agent_id: str) -> bool:
        """Whether `agent_id` is a subagent (it has a parent)."""
        record = self.agents.get(agent_id)
        return record is not None and record.parent_id is not None

    # -- children ----------------------------------------------------------------------------

    def new_child(self, spec: ChildSpec) -> TreeMember:
        """Build a child as `spec` says and register it; `start()` it next."""
        child = self._factory(self, spec)
        record = self.register(
            child, parent_id=spec.parent_id, subagent_type=spec.subagent_type, description=spec.description
        )
        record.prompt = spec.prompt
        self._announced.discard((spec.parent_id, spec.tool_call_id))  # counted from now on as a child
        self._expect_children()
        return child

    def announce(self, parent_id: str, tool_call_ids: list[str]) -> None:
        """A model response holds these `task` calls, each to start a child that runs code under the main agent's
        profile: a pool that is on boots their kernels now (up to `max_subagents` of them), while the calls are
        approved, instead of when the children get their slots. Their children count once registered."""
        self._announced.update((parent_id, call) for call in tool_call_ids)
        self._expect_children()

    def withdraw(self, parent_id: str, tool_call_ids: list[str]) -> None:
        """The calls `announce`d have run (or were rejected, or cancelled): those that started no child count no
        more."""
        calls = {(parent_id, call) for call in tool_call_ids}
        if self._announced & calls:
            self._announced -= calls
            self._expect_children()

    # -- kernels -----------------------------------------------------------------------------

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

    async def acquire_kernel(self, agent_id: str, sandbox: SandboxProfile) -> KernelBackend:
        """A started kernel for `agent_id` confined to `sandbox`.

        Launched for the main agent; for a child, from the pool of its profile (the main agent's,
        or one made when the first child under another profile starts).
        """
        if self.is_child(agent_id) and sandbox == self.sandbox:
            kernel = await self.pool.acquire()
        elif self.is_child(agent_id) and uses_local_kernels(self.config):
            pool = self.profile_pools.get(sandbox)
            if pool is None:
                pool = self.profile_pools[sandbox] = KernelPool(
                    lambda: self.new_kernel("pooled", sandbox, launcher=self.zygote), self.config.kernel_pool_size
                )
            kernel = await pool.acquire()
        else:
            launcher = self.zygote if self.is_child(agent_id) and self.zygote.running else None
            kernel = self.new_kernel(agent_id, sandbox, launcher=launcher)
            await kernel.start()
        kernel.label = agent_id
        return kernel

    def mcp_pool_for(self, agent_id: str) -> McpPool | None:
        """Where `agent_id` takes its MCP connections from: the pool for a child, none for the main agent."""
        return self.mcp_pool if self.is_child(agent_id) else None

    def refill(self, config: AgentConfig) -> None:
        """Top the pools up after a child started (not before: booting would slow that child's own start)."""
        if not self.running:
            return
        self._expect_children()
        for pool in self.profile_pools.values():
            pool.fill()
        self.mcp_pool.fill(config.mcp_servers, config.working_dir)

    def _expect_children(self) -> None:
        """Tell each kernel pool how many children wait for a slot and will take one of its kernels when they get
        one (up to `max_subagents`): their kernels boot while the running children work."""
        if not self.running:
            return  # a closed tree's fresh pools stay empty until the main agent starts again: nobody would stop them
        waiting: dict[SandboxProfile, int] = {}
        for record in self.agents.values():  # called at every child's start and end: kept cheap per record
            if record.parent_id is None or record.state != "waiting":
                continue
            if record.runs_code is None:
                settings = record.agent.settings
                record.runs_code = tool_allowed("execute_ipython_cell", settings.tools, settings.disallowed_tools)
            if record.runs_code:
                waiting[record.agent.sandbox] = waiting.get(record.agent.sandbox, 0) + 1
        self.pool.expect(min(waiting.get(self.sandbox, 0) + len(self._announced), self.config.max_subagents))
        for profile, pool in self.profile_pools.items():
            pool.expect(min(waiting.get(profile, 0), self.config.max_subagents))

    @property
    def running(self) -> bool:
        """Whether the main agent has started the tree (`start()`) and not closed it since."""
        return self._warming is not None

    def start(self) -> None:
        """When the main agent has started, in the background: open the MCP pool's connections; start the
        kernel zygote, then fill the kernel pool."""
        if self._warming is None:
            self._renew()  # nothing has used them yet; the config may have changed since they were made
            self.mcp_pool.fill(self.config.mcp_servers, self.config.working_dir)
            self._warming = asyncio.create_task(self._warm_up(), name="agent-tree-warm-up")

    async def _warm_up(self) -> None:
        if uses_local_kernels(self.config):
            with contextlib.suppress(Exception):  # without a zygote, kernels are launched the ordinary way
                await self.zygote.start()
        self.pool.fill()

    async def close(self) -> None:
        """Stop the warm-up, shut down the kernel pool and the zygote (children are stopped by their parents)."""
        if self._warming is not None and not self._warming.done():
            self._warming.cancel()
            with contextlib.suppress(BaseException):
                await self._warming
        self._warming = None
        self.background.close()
        self.background = BackgroundEvents()
        pool, zygote, mcp_pool, others = self.pool, self.zygote, self.mcp_pool, list(self.profile_pools.values())
        packages = self.code_packages
        self._renew()  # a main agent may be started again after it stopped
        await asyncio.gather(
            pool.close(), mcp_pool.close(), packages.close(), *(p.close() for p in others), return_exceptions=True
        )
        await zygote.close()
