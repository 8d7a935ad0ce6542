"""`AgentTree`: what a main agent and every subagent under it share.

One tree per main agent. It holds the approval policy, the subagent bound (`max_subagents`,
counted across the whole tree), the usage ledger, and the registry of the agents alive in it
(id, parent, type, description); what its agents take (kernels, MCP connections) comes from its
`Supplies`. It builds children through a factory the main agent hands it, so the package that
runs `task` calls (`subagents`) needs neither the `Agent` class nor any agent's private state.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config.prompt_files import PromptFiles
from ..kernels.backends import KernelBackend
from ..models.retries import RequestSlots
from ..policy.hooks import Hooks
from ..sandbox import SandboxProfile
from ..telemetry import open_telemetry
from ..tools.names import tool_allowed
from ..usage import UsageLedger
from ..workspaces import Journal, Workspace
from .background import BackgroundEvents
from .copy_kernels import start_in_copy
from .members import AgentRecord, ChildSpec, SubagentInfo, TreeMember
from .supplies import Supplies

if TYPE_CHECKING:
    from ..config.agent_config import AgentConfig
    from ..config.definitions import AgentType
    from ..policy.approvals import ApprovalPolicy
    from ..telemetry.tracing import Telemetry

__all__ = [
    "AgentFactory", "AgentRecord", "AgentTree", "BackgroundEvents", "ChildSpec", "SubagentInfo",
    "TreeMember",
]

AgentFactory = Callable[["AgentTree", ChildSpec], TreeMember]
"""Builds a child of `spec.parent_id` that joins `tree` (the main agent's module supplies it)."""




class AgentTree:
    """The shared state of one agent tree; created by the main agent, closed when it stops."""

    def __init__(self, root: TreeMember, *, approvals: ApprovalPolicy, factory: AgentFactory) -> None:
        self.root = root
        """The main agent."""
        self.approvals = approvals
        """Standing decisions, shared by every agent of the tree."""
        self.agents: dict[str, AgentRecord] = {}
        """The live agents by id, the main agent included."""
        self.agent_types: dict[str, AgentType] = {}
        """The agent types by name (built-in, files, config), loaded when the main agent starts."""
        self.prompt_files = PromptFiles()
        """The instructions (`AGENTS.md`) and skills of the run, read when the main agent starts."""
        self.usage = UsageLedger()
        """Token usage and cost of every agent of the tree, by agent id."""
        self.background = BackgroundEvents()
        """Where background subagents' events go (into the running turn, or to `Agent.background_events()`)."""
        self.hooks = Hooks()
        """The config's hooks (set when the main agent starts); each agent adds its type's own."""
        self.supplies = Supplies(lambda: self.config, root.agent_id)
        """The kernels, MCP connections, packages and models its agents take."""
        self.workspaces: dict[str, Workspace] = {}
        """The copy-on-write workspaces of running children, by agent id (their kernels are started in them)."""
        self.journal = Journal()
        """The folder's versions that applying change sets replaced: the bases later sets are merged against."""
        self.telemetry: Telemetry | None = None
        """Its traces and metrics, while the main agent runs with telemetry on (`start_telemetry`)."""
        self._factory = factory
        self._announced: set[tuple[str, str]] = set()
        """`task` calls of a model response (by parent and call id) whose children will take a kernel from the main
        pool and are not registered yet (`announce`)."""
        self._announced_views: set[tuple[str, str]] = set()
        """Those of them whose children are isolated: they take a kernel booted in a view of its own instead."""
        self._renew()

    def _renew(self) -> None:
        """A new bound and new request slots from the main agent's current config."""
        self.bound = asyncio.Semaphore(self.config.max_subagents)
        """At most `max_subagents` children exist at once, across the tree: a child takes a slot before its kernel
        exists and gives it back when its kernel is gone (its session record, events and hooks come after)."""
        self.model_requests = RequestSlots(self.config.max_model_requests)
        """At most `max_model_requests` model requests of the tree in flight at once (a retry's wait holds none)."""

    @property
    def sandbox(self) -> SandboxProfile:
        """The main agent's sandbox profile; the main pool's kernels are confined to it."""
        return self.supplies.sandbox

    @sandbox.setter
    def sandbox(self, profile: SandboxProfile) -> None:
        self.supplies.sandbox = profile

    @property
    def config(self) -> AgentConfig:
        """The main agent's config: the kernel settings and the bound of the whole tree come from it."""
        return self.root.config

    # -- the registry ------------------------------------------------------------------------

    def register(
        self, agent: TreeMember, *, parent_id: str | None, agent_type: str = "general", description: str = ""
    ) -> AgentRecord:
        """Add a live agent to the registry."""
        record = AgentRecord(agent.agent_id, parent_id, agent_type, description, agent)
        self.agents[agent.agent_id] = record
        return record

    def unregister(self, agent_id: str) -> None:
        """Remove an agent that ended."""
        record = self.agents.pop(agent_id, None)
        if record is not None:
            if record.refill_for is not None:  # it ended before its first model request went out
                self.supplies.top_up(record.refill_for)
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
        record.agent.inbox.tell(text, "the user")
        self.background.emit(SubagentMessage(agent_id=record.parent_id, subagent_id=agent_id, content=text,
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
                agent_id=record.agent_id, parent_id=record.parent_id, agent_type=record.agent_type,
                description=record.description, prompt=record.prompt,
                state="waiting for approval" if self.approvals.waits(record.agent_id) else record.state,
                background=record.background, turns=record.agent.turns.turns_used, elapsed=now - record.started_at,
                input_tokens=used.input_tokens, output_tokens=used.output_tokens, cost=used.cost,
                sandbox=record.agent.sandbox.describe(),
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
            child, parent_id=spec.parent_id, agent_type=spec.agent_type, description=spec.description
        )
        record.prompt, record.tool_call_id = spec.prompt, spec.tool_call_id
        if spec.workspace is not None:  # known before it is counted: it takes a kernel in a view, not the pool's
            self.workspaces[child.agent_id] = spec.workspace
        self._announced.discard((spec.parent_id, spec.tool_call_id))  # counted from now on as a child
        self._announced_views.discard((spec.parent_id, spec.tool_call_id))
        self._expect_children()
        return child

    def announce(self, parent_id: str, tool_call_ids: list[str], *, isolated: list[str] | None = None) -> None:
        """A model response holds these `task` calls, each to start a child that runs code under the main agent's
        profile: a pool that is on boots their kernels now (up to `max_subagents` of them), while the calls are
        approved, instead of when the children get their slots. Their children count once registered.
        `isolated` ones (among them) start children with a copy-on-write view: theirs boot in views of their own."""
        views = set(isolated or ())
        self._announced.update((parent_id, call) for call in tool_call_ids if call not in views)
        self._announced_views.update((parent_id, call) for call in tool_call_ids if call in views)
        self._expect_children()

    def withdraw(self, parent_id: str, tool_call_ids: list[str]) -> None:
        """The calls `announce`d have run (or were rejected, or cancelled): those that started no child count no
        more."""
        calls = {(parent_id, call) for call in tool_call_ids}
        if (self._announced | self._announced_views) & calls:
            self._announced -= calls
            self._announced_views -= calls
            self._expect_children()

    # -- supplies ----------------------------------------------------------------------------

    async def acquire_kernel(self, agent_id: str, sandbox: SandboxProfile) -> KernelBackend:
        """A started kernel for `agent_id` confined to `sandbox`: launched for the main agent, from a pool for a
        child (see `Supplies.acquire_kernel`)."""
        child = self.is_child(agent_id)
        began = time.monotonic()
        workspace = self.workspaces.get(agent_id)
        if workspace is not None and workspace.mechanism == "copy":
            zygote = self.supplies.zygote
            kernel = await start_in_copy(self.supplies.config, agent_id, sandbox, workspace,
                                         launcher=zygote if zygote.running else None)
        else:
            kernel = await self.supplies.acquire_kernel(agent_id, sandbox, is_child=child, workspace=workspace)
        if self.telemetry is not None:
            self.telemetry.kernel_spawned(time.monotonic() - began, how="child" if child else "main",
                                          sandbox=sandbox.name)
        return kernel

    def refill(self, config: AgentConfig) -> None:
        """Top the pools up after a child started (not before: booting would slow that child's own start)."""
        if not self.running:
            return
        self._expect_children()
        self.supplies.top_up(config)

    def refill_after_first_request(self, agent_id: str, config: AgentConfig) -> None:
        """Top the pools up once the child `agent_id` has sent its first model request (at once if it has): a
        kernel's boot costs the host ~5-10 ms of CPU on the event loop, which would otherwise come between the
        child taking its pooled kernel and its request going out. A child that ends first tops them up as it ends."""
        record = self.agents.get(agent_id)
        if record is None or record.requested:
            self.refill(config)
        else:
            record.refill_for = config

    def request_sent(self, agent_id: str) -> None:
        """`agent_id`'s model request has gone out (its response stream is open): a top-up held back for it runs."""
        record = self.agents.get(agent_id)
        if record is None or record.requested:
            return
        record.requested = True
        config, record.refill_for = record.refill_for, None
        if config is not None:
            self.refill(config)

    def _expect_children(self) -> None:
        """Tell each kernel pool how many children wait for a slot and will take one of its kernels when they get
        one (up to `max_subagents`): their kernels boot while the running children work."""
        if not self.running:
            return  # a closed tree's fresh pools stay empty until the main agent starts again: nobody would stop them
        waiting: dict[SandboxProfile, int] = {}
        views: dict[SandboxProfile, int] = {}
        for record in self.agents.values():  # called at every child's start and end: kept cheap per record
            if record.parent_id is None or record.state != "waiting":
                continue
            if record.runs_code is None:
                settings = record.agent.settings
                record.runs_code = tool_allowed("execute_ipython_cell", settings.tools, settings.disallowed_tools)
            if record.runs_code:
                workspace = self.workspaces.get(record.agent.agent_id)
                if workspace is None:
                    waiting[record.agent.sandbox] = waiting.get(record.agent.sandbox, 0) + 1
                elif workspace.mechanism == "overlay":  # a private copy's kernel is forked in the copy
                    views[record.agent.sandbox] = views.get(record.agent.sandbox, 0) + 1
        self.supplies.expect(waiting, len(self._announced), views=views, announced_views=len(self._announced_views))

    @property
    def running(self) -> bool:
        """Whether the main agent has started the tree (`start()`) and not closed it since."""
        return self.supplies.running

    def start(self) -> None:
        """The main agent has started: the supplies may warm up from now on (see `Supplies.start`)."""
        if not self.supplies.running:
            self._renew()
            self.supplies.start()

    def start_telemetry(self, config: AgentConfig) -> None:
        """Open the tree's telemetry if `config` or the environment turns it on (once per start of the main agent)."""
        if self.telemetry is None:
            self.telemetry = open_telemetry(config.telemetry, content=config.telemetry_content)

    async def close(self) -> None:
        """End the background events and close the supplies and telemetry (children are stopped by their parents)."""
        self.background.close()
        self.background = BackgroundEvents()
        await self.supplies.close()
        telemetry, self.telemetry = self.telemetry, None
        if telemetry is not None:  # its last spans leave in a thread (bounded): the loop goes on meanwhile
            await asyncio.to_thread(telemetry.close)
        self._renew()  # a main agent may be started again after it stopped
