"""`Agent`: the lifecycle of one agent and the `stream()` loop of a turn.

One turn: the prompt goes to the model (streamed through pydantic-ai); each tool call the
model makes is validated, put to the consumer as an `ApprovalRequest`, and run once approved
(several calls of one response run concurrently; cells on the one kernel run in order); the
results go back to the model; this repeats until the model answers without tool calls, a call
is rejected, or `max_turns` rounds are done.

Rules for faults and cancellation:
- what the model can correct (unknown tool, bad arguments, a failing cell or MCP call, a failed
  subagent) becomes a tool result, and the turn goes on;
- a model request that fails raises `ModelError` out of `stream()`, and the conversation
  history is as it was before the turn;
- a cancelled turn (`cancel()`, `stop()`, a consumer that closes the stream, a new `stream()`)
  keeps what completed: the history holds the finished calls' results, each unfinished call is
  answered with a result saying the user interrupted it, and a note says the turn was
  interrupted, so the model's memory matches what its kernel did;
- a turn only starts a model round or a round of tool calls while its consumer is reading: a
  consumer that stops iterating (`break` without closing the stream) leaves the turn waiting,
  not acting, and the next `stream()` ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..code_tools import CodeTools, mcp_prompt, open_code_tools
from ..config.agent_config import DEFAULT_SYSTEM_PROMPT, AgentConfig, default_system_prompt
from ..config.agent_types import (
    check_tool_names,
    check_types,
    compose_system_prompt,
    configure,
    confine,
    load_agent_types,
    project_agent_types,
    task_tool,
)
from ..config.definitions import GENERAL, AgentDefinition
from ..errors import ConfigError
from ..events import (
    AgentEvent,
    TurnCancelled,
)
from ..kernels.backends import KernelBackend, PendingKernel
from ..kernels.cell_images import accepts_images
from ..mcp.servers import McpConnections
from ..policy.approvals import ApprovalPolicy, ApprovalRules
from ..policy.hooks import Hooks
from ..sandbox import BUILT_IN_PROFILES, SandboxProfile
from ..sandbox import effective as effective_sandbox
from ..subagents.runner import SubagentRunner
from ..tools import BUILTIN_TOOL_NAMES, Toolbox, ToolSpec, builtin_tool
from ..tools.names import server_may_offer, tool_allowed, unmatched_patterns
from ..tree.registry import AgentTree, ChildSpec, SubagentInfo, TreeMember
from ..usage import TreeUsage
from .messages import SubagentMessages
from .tool_calls import ToolCallRunner
from .turn import Reader, TurnEnded, TurnEngine, wait_for_end

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models import Model

    from ..config.project_trust import ProjectPowers
    from ..sessions import AgentLog, SessionStore
    from ..sessions.index import SavedAgent

__all__ = ["Agent"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

_agent_ids: set[str] = set()


def new_agent_id() -> str:
    """A short id, `agent-` plus hex, unique in this process."""
    size = 2
    while True:
        for _ in range(32):
            candidate = f"agent-{secrets.token_hex(size)}"
            if candidate not in _agent_ids:
                _agent_ids.add(candidate)
                return candidate
        size += 1



class Agent(TurnEngine, SubagentMessages):
    """A code-action agent with its own IPython kernel and its own MCP connections.

    Use it as an async context manager (or call `start()` and `stop()`), then iterate
    `stream(prompt)` once per user turn::

        async with Agent(AgentConfig(model="openai:gpt-4.1")) as agent:
            async for event in agent.stream("What is 2**100?"):
                if isinstance(event, ApprovalRequest):
                    event.approve(True)
    """

    def __init__(
        self,
        config: AgentConfig | None = None,
        *,
        agent_id: str | None = None,
        approvals: ApprovalPolicy | None = None,
        session: str | None = None,
        tree: AgentTree | None = None,
        parent_id: str | None = None,
        trust_project: bool | None = None,
    ) -> None:
        self.config = config or AgentConfig()
        self.trust_project = trust_project
        """Whether the agent types in `<working_dir>/.freeact-sub/agents` that carry powers (hooks, endpoints, keys'
        names, MCP servers, `allow` rules, a wider sandbox) are used: True yes, False no (they are left out, the
        other types work), None (the default) only if the person trusts the folder, else `start()` raises a
        `ConfigError` naming each file and field. Read at `start()`."""
        self._settings: AgentConfig | None = None
        self.session_id: str | None = None
        """The id of the session this agent saves to (set at `start()`), or the one given to resume."""
        saved_history: list[ModelMessage] = []
        if session is not None:
            agent_id, saved_history = self._saved_main_agent(session, agent_id)
        self.agent_id = agent_id or new_agent_id()
        """This agent's id; every event it produces carries it."""
        self.parent_id = parent_id if tree is not None else None
        """The id of the agent that started this one as a subagent (None for a main agent)."""
        if tree is None:
            policy = approvals or ApprovalPolicy(approve_everything=self.config.auto_approve)
            tree = AgentTree(self, approvals=policy, factory=_child_agent)
            tree.register(self, parent_id=None)
        self.tree = tree
        """What this agent shares with the other agents of its tree (approvals, bound, kernel pool, registry)."""
        self.approvals = tree.approvals
        """Standing decisions (approve everything from one agent, or from all); shared with subagents."""
        self.turns_used = 0
        """Model rounds of the current (or last) turn."""
        self.turn_limit_reached = False
        """Whether the last turn stopped at `max_turns`."""
        self.last_turn_rejected = False
        """Whether the last turn ended because the consumer rejected a call."""
        self.subagent_type = GENERAL
        """The agent type this agent runs as (`config.agent` for a main agent, the `task` call's for a subagent)."""
        self.definition: AgentDefinition | None = None
        """Its type's definition (known after `start()` for a main agent)."""
        self.rules = ApprovalRules()
        """Allow / ask / deny rules: its type's, then its parent's type's, then `config.approvals`."""
        self.max_tokens: int | None = None
        """Budget (a subagent's): input plus output tokens over its life; checked before each model request."""
        self.max_tool_calls: int | None = None
        """Budget (a subagent's): tool calls over its life; checked before each model request."""
        self.max_cost: float | None = None
        """Budget (a subagent's): USD over its life; checked before each model request."""
        self._sandbox: SandboxProfile = BUILT_IN_PROFILES["off"]
        self._hooks: Hooks | None = None
        self._prompt_notes: list[str] = []
        self.tool_calls_used = 0
        """Tool calls made over this agent's life."""
        self.budget_reached: str | None = None
        """Which budget stopped the last turn (its turn then also counts as having reached a limit)."""
        self._history: list[ModelMessage] = saved_history
        """The conversation; a resumed agent has its saved one from the start (`start()` reads it again, locked)."""
        self._model: Model | None = None
        self._turn_model: Model | None = None
        """The model of the current turn's rounds when `stream(model=...)` named one (else `_model`)."""
        self._kernel: KernelBackend | None = None
        self._mcp: McpConnections | None = None
        self._toolbox: Toolbox | None = None
        self._calls: ToolCallRunner | None = None
        self._code_tools: CodeTools | None = None
        self._subagents: SubagentRunner | None = None
        self._turn: asyncio.Task[None] | None = None
        self._reader: Reader | None = None
        self._upstream: Callable[[], Awaitable[None]] | None = None
        """For a subagent: waits until the consumer of the parent's stream is reading."""
        self._started = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._store: SessionStore | None = None
        self._log: AgentLog | None = None
        """Where this agent's conversation is saved (None: not saved)."""
        self._resume_note = False
        """Whether the next prompt tells the model that its kernel is new (a resumed conversation)."""
        self._first_note: str | None = None
        """A subagent's note that goes with its first prompt (resumed or forked: its kernel is new)."""
        self._told: list[str] = []
        """Notes on background children told to the model in the current turn."""
        self._inbox: list[tuple[str, str]] = []
        """Messages sent to it while it works (sender, text), read at its next model request."""

    def _saved_main_agent(self, session: str, agent_id: str | None) -> tuple[str, list[ModelMessage]]:
        """Check that `session` exists; the resumed agent keeps the main agent's id. Returns it and its history."""
        from ..sessions import open_session

        saved = open_session(session, self.settings.working_dir)
        self.session_id = saved.session_id
        main = saved.main_id
        if agent_id is not None and agent_id != main:
            raise ValueError(f"agent_id: session {saved.session_id} belongs to {main}, not {agent_id}")
        _agent_ids.add(main)
        return main, saved.messages(repaired=True)

    def __del__(self) -> None:
        # Dropped while started (never stopped): end its processes rather than leak them, and say so.
        if getattr(self, "_started", False):
            from ._abandoned import release

            release(self, self._loop)

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Agent:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def started(self) -> bool:
        return self._started

    @property
    def is_subagent(self) -> bool:
        """Whether this agent was started by another one (through `task`)."""
        return self.parent_id is not None

    @property
    def model(self) -> Model:
        """The pydantic-ai `Model` this agent talks to (after `start()`)."""
        if self._model is None:
            raise RuntimeError("the agent has not started: its model is resolved in `start()`")
        return self._model

    @property
    def kernel(self) -> KernelBackend | None:
        """This agent's kernel while it runs."""
        return self._kernel

    def own_processes(self) -> list[int]:
        """PIDs of the processes this agent started and owns: its kernel, and a main agent's kernel zygote."""
        owned = [self._kernel.pid if self._kernel is not None else None]
        if not self.is_subagent:
            owned.append(self.tree.zygote.pid)
        return [pid for pid in owned if pid is not None]

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered to the model (after `start()`)."""
        return self._toolbox.names if self._toolbox else []

    @property
    def system_prompt(self) -> str:
        """The system prompt this agent sends: the configured one, its type's role, then a section on its MCP tools."""
        base = self.settings.system_prompt
        if base == DEFAULT_SYSTEM_PROMPT:  # the built-in prompt names only the tools this agent has
            settings = self.settings
            names = set(self.tool_names) or {
                name for name in ("execute_ipython_cell", "task")
                if tool_allowed(name, settings.tools, settings.disallowed_tools)
            }
            base = default_system_prompt(runs_code="execute_ipython_cell" in names, starts_subagents="task" in names)
        return compose_system_prompt(
            base,
            self.definition.prompt if self.definition else "",
            mcp_prompt(self.settings, self._mcp, self._code_tools),
        )

    @property
    def usage(self) -> TreeUsage:
        """Tokens and cost so far, per agent id and for the tree (this agent and every subagent).

        `agent.usage.total.total_tokens`, `agent.usage.of("agent-3fa2").cost` (USD, None if the
        model's price is unknown).
        """
        return self.tree.usage.snapshot()

    @property
    def history(self) -> list[ModelMessage]:
        """A copy of the conversation so far (pydantic-ai messages)."""
        return list(self._history)

    async def start(self) -> None:
        """Resolve the model, then start the kernel and connect the MCP servers concurrently.

        A main agent launches its kernel; a subagent's kernel comes from its tree's pool.
        """
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        if not self.is_subagent:
            self.config.make_working_dir()
            self.config.make_state_dir()  # a read-only working folder is one clear error, not a traceback mid-start
            self._take_type()  # a bad type file or field is a ConfigError before any kernel starts
        self._model = self.settings.resolve_model()
        if not self.is_subagent and self.config.max_cost is not None:
            from ..usage import model_is_priced

            if not model_is_priced(self._model):
                raise ConfigError(
                    f"max_cost: a cost budget needs a model whose price is known; the price of "
                    f"{getattr(self._model, 'model_name', self.settings.model)!r} is not (use max_tokens instead)"
                )
        if not self.is_subagent:
            self._open_session()
        try:
            await self._start_resources()
        except BaseException:
            self._close_session("failed")
            raise

    @property
    def sandbox(self) -> SandboxProfile:
        """The sandbox profile this agent's kernel runs under (`off` until a main agent has started)."""
        return self._sandbox

    @property
    def hooks(self) -> Hooks:
        """The hooks that apply to this agent: the config's, plus its agent type's own."""
        if self._hooks is None:
            own = self.definition.hooks if self.definition is not None else {}
            self._hooks = self.tree.hooks.plus(own, self.subagent_type) if own else self.tree.hooks
        return self._hooks

    def hook_context(self) -> dict[str, Any]:
        """The fields of every hook payload about this agent."""
        return {
            "agent_id": self.agent_id,
            "parent_id": self.parent_id,
            "subagent_type": self.subagent_type,
            "session_id": getattr(self.tree.root, "session_id", None),
            "cwd": str(self.settings.working_dir),
        }

    @property
    def settings(self) -> AgentConfig:
        """What this agent runs with: `config` with its agent type applied (model, tools, MCP servers, turns)."""
        return self._settings or self.config

    def untrusted_project(self) -> ProjectPowers | None:
        """The working folder's agent type files with powers, if they wait for the person's trust; else None.

        None when `trust_project` is given, when no project file carries powers, or when the person
        trusts the folder with these files. A consumer asks the person, then calls `remember()` on
        the result (trust) or sets `trust_project = False` (run without them) before `start()`.
        """
        if self.trust_project is not None or self.is_subagent:
            return None
        project = project_agent_types(self.config.working_dir)
        return None if project.trusted else project

    def _take_type(self) -> None:
        """Load the agent types (built-in, files, config) into the tree and apply `config.agent` to this agent."""
        servers = list(self.config.mcp_servers)
        for field in ("tools", "disallowed_tools"):
            check_tool_names(getattr(self.config, field) or [], f"config: {field}", servers)
        # an unknown tool name in a type is an error naming its file and field, not a warning when it starts
        types = load_agent_types(self.config.agents, self.config.working_dir, trust_project=self.trust_project,
                                 servers=servers)
        name = self.config.agent or GENERAL
        if name not in types and (inert := self._inert_type(name)) is not None:
            raise ConfigError(f"agent: the agent type {name!r} ({inert}) is not used: this folder is not trusted")
        if name not in types:
            raise ConfigError(f"agent: unknown agent type {name!r}; the known types are {', '.join(sorted(types))}")
        if types[name].mode == "subagent":
            raise ConfigError(
                f"agent: the agent type {name!r} has mode 'subagent': it runs only through `task`, not as the main "
                "agent (give it mode 'all' to allow both)"
            )
        gateway = self.config.kernel_gateway is not None
        self._sandbox, definition = confine(effective_sandbox(self.config.sandbox, gateway=gateway), types[name], name,
                                            self.config)
        self.subagent_type, self.definition = name, definition
        self._settings = configure(self.config, definition, name)
        self.tree.sandbox = self._sandbox
        self.tree.hooks = Hooks(self.config.hooks, cwd=str(self.config.working_dir))
        self._hooks = None
        check_types(self._settings, types, self._sandbox)
        self.tree.types = types
        self.rules = ApprovalRules(
            [(f"agent type {name}", definition.approvals), ("approvals", self.config.approvals)]
        )

    def _inert_type(self, name: str) -> str | None:
        """The file and fields of the project type `name` if it was left out for its powers."""
        for file in project_agent_types(self.config.working_dir).powerful:
            if file.name == name:
                return f"{file.path}: {', '.join(file.powers)}"
        return None

    def _open_session(self) -> None:
        """Create this main agent's session, or resume the one it was given (locked while it runs)."""
        from ..sessions import SessionStore

        if self._store is not None:
            return
        if self.session_id is not None:
            store = SessionStore.open(self.settings.working_dir, self.session_id)
            try:
                log, history = store.resume_agent(self.agent_id)
            except BaseException:
                store.close()
                raise
            self._history = history  # what the file holds (after a stop() and start(), the same conversation)
            self._resume_note = bool(history)
        elif self.settings.save_sessions:
            store = SessionStore.create(self.settings.working_dir)
            log = store.agent(self.agent_id, model=self._model)
            self.session_id = store.session_id
        else:
            return
        self._store, self._log = store, log
        log.status("running")

    def _shown(self, record: dict[str, Any]) -> None:
        """Save what the live view shows that the transcript does not hold (in the session, if it saves one)."""
        if self._log is not None:
            self._log.shown(record)

    def saved_subagent(self, agent_id: str) -> list[ModelMessage] | None:
        """The saved conversation of a subagent this agent started, ready for the model; None if its session has none.

        It may come from an earlier process: `task(resume=…)` continues a child that ran before a restart.
        """
        return self._log.saved_child(agent_id) if self._log is not None else None

    def saved_subagents(self) -> list[SavedAgent]:
        """The subagents this agent started that its session holds (this process's and earlier ones')."""
        return self._log.saved_children() if self._log is not None else []

    def finished(self, status: str) -> None:
        """Record how this agent ended (done, failed, cancelled, …) in its session; it saves nothing after that."""
        self._close_session(status)

    def _close_session(self, status: str) -> None:
        if self._log is not None:
            self._log.sync(self._history)
            self._log.status(status, turns=self.turns_used, ended=True)
            self._log.close()
        if self._store is not None:
            self._store.close()
        self._store, self._log = None, None

    async def _start_resources(self) -> None:
        settings = self.settings
        servers = {  # a server none of whose tools this agent may use is not started for it
            name: spec
            for name, spec in settings.mcp_servers.items()
            if server_may_offer(name, settings.tools, settings.disallowed_tools)
        }
        mcp = McpConnections(
            servers, cwd=settings.working_dir, pool=self.tree.mcp_pool_for(self.agent_id),
            listings=self.tree.mcp_listings,
        )
        self._mcp = mcp

        runs_code = tool_allowed("execute_ipython_cell", settings.tools, settings.disallowed_tools)
        kernel_task = asyncio.create_task(self._acquire_kernel(runs_code))
        mcp_task = asyncio.create_task(mcp.open())
        try:
            await asyncio.gather(kernel_task, mcp_task)
        except BaseException:
            for task in (kernel_task, mcp_task):
                if not task.cancelling():  # a second cancel would cut its own cleanup short
                    task.cancel()
            await asyncio.gather(kernel_task, mcp_task, return_exceptions=True)
            if kernel_task.done() and not kernel_task.cancelled() and kernel_task.exception() is None:
                if (started := kernel_task.result()) is not None:
                    await started.shutdown()
            await mcp.close()
            self._mcp = None
            raise
        self._kernel = kernel_task.result()
        specs = [builtin_tool("execute_ipython_cell"), builtin_tool("reset_kernel")] if self._kernel else []
        if (
            settings.enable_subagents
            and self.tree.depth(self.agent_id) < settings.max_depth
            and tool_allowed("task", settings.tools, settings.disallowed_tools)
        ):
            specs.append(task_tool(self.tree.types, settings))
            specs += [builtin_tool(name) for name in ("task_output", "task_stop", "task_list", "task_send")]
            self._subagents = SubagentRunner(self.tree, self)
            if not self.is_subagent:
                self.tree.start()
        if self.is_subagent and tool_allowed("task_report", settings.tools, settings.disallowed_tools):
            specs.append(builtin_tool("task_report"))  # a type's `tools` list names it like any other tool
        if settings.mcp_tools != "code" or self._kernel is None:  # without a kernel, MCP tools are calls
            specs += [
                ToolSpec(name=t.qualified_name, description=t.description, parameters=t.input_schema)
                for t in mcp.tools
            ]
        self._toolbox = Toolbox(
            [spec for spec in specs if tool_allowed(spec.name, settings.tools, settings.disallowed_tools)]
        )
        self._calls = ToolCallRunner(
            agent_id=self.agent_id,
            config=settings,
            toolbox=self._toolbox,
            approvals=self.approvals,
            kernel=self._kernel,
            mcp=mcp,
            subagents=self._subagents,
            rules=self.rules,
            sandbox=self._sandbox,
            hooks=self.hooks,
            hook_context=self.hook_context,
            model_sees_images=accepts_images(self._model),
            report=self.report_to_parent if self.is_subagent else None,
            record=self._shown,
            stopped_by=lambda: getattr(self.tree.agents.get(self.agent_id), "stopped_by", None),
        )
        try:
            if self._kernel is not None:
                self._code_tools = await open_code_tools(
                    agent_id=self.agent_id, config=settings, kernel=self._kernel, mcp=mcp, ask=self._calls.ask,
                    packages=self.tree.code_packages,
                    allowed=lambda name: tool_allowed(name, settings.tools, settings.disallowed_tools),
                )
        except BaseException:
            self._started = True
            await self.stop()
            raise
        self._calls.code_tools = self._code_tools
        self._started = True
        try:
            self._warn_unmatched_patterns([t.qualified_name for t in mcp.tools])
        except BaseException:  # warnings turned into errors: nothing it started may outlive it
            await self.stop()
            raise

    def _warn_unmatched_patterns(self, mcp_tool_names: list[str]) -> None:
        """Warn of `tools` / `disallowed_tools` patterns that match no tool (silently they would change nothing)."""
        settings = self.settings
        names = [*BUILTIN_TOOL_NAMES, *mcp_tool_names]
        allowed, denied = settings.tools, settings.disallowed_tools
        unstarted = [server for server in settings.mcp_servers if not server_may_offer(server, allowed, denied)]
        for field, patterns in (("tools", settings.tools or []), ("disallowed_tools", settings.disallowed_tools)):
            for pattern in unmatched_patterns(patterns, names, unstarted):
                where = f"agent type {self.subagent_type!r}" if self.subagent_type != GENERAL else "config"
                warnings.warn(
                    f"{where}: {field} pattern {pattern!r} matches no tool of {self.agent_id} "
                    f"(its tools: {', '.join(names)})",
                    UserWarning,
                    stacklevel=2,
                )

    async def _acquire_kernel(self, runs_code: bool) -> KernelBackend | None:
        """This agent's kernel; none for an agent that may not run code (no kernel process is started).

        A subagent's kernel is acquired in the background: its first model request does not wait for a
        kernel to boot, only its first cell does. The main agent's start waits for its kernel, so a kernel
        that cannot start is an error of `start()`.
        """
        if not runs_code:
            return None
        if self.is_subagent:
            images = self.settings.resolved_images_dir
            return PendingKernel(self._child_kernel(), label=self.agent_id, images_dir=images)
        return await self.tree.acquire_kernel(self.agent_id, self.sandbox)

    async def _child_kernel(self) -> KernelBackend:
        kernel = await self.tree.acquire_kernel(self.agent_id, self.sandbox)
        self.tree.refill(self.settings)  # the pools top up once this child has its kernel, not ahead of it
        return kernel

    async def stop(self) -> None:
        """Cancel a running turn, stop subagents, shut the kernel down and close MCP connections."""
        turn = self._turn
        if turn is not None and not turn.done():
            turn.cancel()
            with contextlib.suppress(BaseException):
                await turn
        closers = []
        if self._code_tools is not None:
            closers.append(self._code_tools.close())
        if self._subagents is not None:
            closers.append(self._subagents.close())
        if self._kernel is not None:
            # A subagent's kernel dies with it: nobody can reach its state any more, so it is killed at once.
            closers.append(self._kernel.shutdown(now=self.is_subagent))
        if self._mcp is not None:
            closers.append(self._mcp.close())
        if not self.is_subagent:  # the tree's never-used MCP connections close beside this agent's own, not after
            closers.append(self.tree.mcp_pool.close())
        self._subagents, self._kernel, self._mcp, self._calls = None, None, None, None
        self._code_tools = None
        self._started = False
        if closers:
            await asyncio.shield(asyncio.gather(*closers, return_exceptions=True))
        if not self.is_subagent:
            await asyncio.shield(self.tree.close())
            self._close_session("stopped")

    # -- a turn ----------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the current turn promptly: the model stream, approval waits, running cells, subagents."""
        if self._turn is not None and not self._turn.done():
            self._turn.cancel()

    def cancel_subagent(self, agent_id: str) -> bool:
        """Stop one subagent of this agent's tree, at any depth, in the foreground or the background.

        Its parent's `task` result says that the user stopped it, and the parent's turn goes on;
        its siblings are untouched. Returns False if no such subagent is running.
        """
        return self.tree.cancel(agent_id, by="the user")

    def subagents(self) -> list[SubagentInfo]:
        """Every live subagent of this agent's tree: id, parent, type, state, turns, elapsed, tokens, cost."""
        return self.tree.subagents()

    async def background_events(self) -> AsyncGenerator[AgentEvent, None]:
        """The events of background subagents that arrive while no `stream()` runs, for the agent's life.

        Iterate it in a task of its own next to your `stream()` calls: during a turn background
        events come through `stream()`, between turns through this iterator — above all their
        `ApprovalRequest`s, which wait for your answer as any other. It ends when the agent stops.
        """
        async for event in self.tree.background.iterate():
            yield event

    async def stream(
        self, prompt: str, max_turns: int | None = None, *, subagent_type: str | None = None,
        model: str | Model | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run one user turn and yield its events as they happen (subagents' events included).

        `max_turns` bounds the model rounds (one model response plus its tool calls) of this turn;
        default `config.max_turns`. Raises `ModelError` if the model request fails.

        `subagent_type="explore"` runs the turn as your own `task` call instead (what `@explore …`
        does in the terminal and the notebook): that type starts as a subagent of this agent with
        `prompt` as its job, asked and approved as any `task` call, and its answer goes into this
        agent's history as the call's result. `model` is the model of this turn (of that subagent,
        with `subagent_type`). A type this agent cannot start raises `ValueError`, an unknown
        model `ConfigError`, before the turn begins.

        The turn goes only as far as you read: it starts a model round or a round of tool calls
        only once you have taken every event so far. Leaving the loop early (`break`) leaves the
        turn waiting; closing the stream (`contextlib.aclosing`, `await events.aclose()`) or the
        next `stream()` call ends it as cancelled. A `stream()` call while a turn is unfinished
        ends that turn first (its consumer, if still reading, gets `TurnCancelled`).
        """
        if (bad := _LONE_SURROGATE.search(prompt)) is not None:  # no file, JSON body or model can carry one
            raise ValueError(f"the prompt is not valid Unicode text: character {bad.start() + 1} is a lone surrogate "
                             "(a byte that was not UTF-8, as Python reads one); replace it, e.g. with U+FFFD")
        if not self._started:
            raise RuntimeError("the agent is not running: use `async with agent:` or call `await agent.start()`")
        turn_model, child_model = None, None
        if subagent_type is not None:
            child_model = self.check_direct(subagent_type, model, self.tree.types)
        elif model is not None:
            turn_model = self.settings.model_copy(update={"model": model}).resolve_model()
        await self._end_previous_turn()
        reader = Reader()
        limit = max_turns if max_turns is not None else self.settings.max_turns
        body = self._turn_keeping_history(prompt, limit, reader.emit, subagent_type=subagent_type,
                                          model=child_model, turn_model=turn_model)
        turn = asyncio.create_task(body, name=f"turn:{self.agent_id}")
        background = self.tree.background if not self.is_subagent else None
        if background is not None:
            background.attach(reader.emit)  # background subagents' events join this turn while it runs

        def turn_ended(_: object) -> None:
            if background is not None:
                background.detach()
            reader.queue.put_nowait(TurnEnded())

        turn.add_done_callback(turn_ended)
        self._turn, self._reader = turn, reader
        try:
            while not isinstance(item := await reader.next(), TurnEnded):
                yield item
            if turn.cancelled():
                yield TurnCancelled(agent_id=self.agent_id)
            elif (error := turn.exception()) is not None:
                raise error
        finally:
            # A consumer that stops iterating early (aclose, its own cancellation, or a `break`
            # once the generator is finalized) ends the turn.
            if not turn.done():
                turn.cancel()
                await wait_for_end(turn)
            if self._turn is turn:
                self._turn, self._reader = None, None

    async def _end_previous_turn(self) -> None:
        """End a turn that is still unfinished (its consumer left with `break`, or a new turn replaces it)."""
        previous = self._turn
        if previous is None or previous.done():
            return
        previous.cancel()
        await wait_for_end(previous)

    def take_child_setup(self, spec: ChildSpec, parent: Agent | None) -> None:
        """Set this new agent up as the child `spec` describes (its tree's factory calls this once, before `start()`).

        It continues `spec.history` (resume, fork), is told `spec.note` first, keeps the budgets,
        type, rules and sandbox the `task` call resolved, acts only while its parent's stream is
        read, and is saved in its parent's session.
        """
        if spec.history is not None:
            self._history = list(spec.history)
        self._first_note = spec.note
        self.max_tokens, self.max_tool_calls, self.max_cost = spec.max_tokens, spec.max_tool_calls, spec.max_cost
        self._sandbox = spec.sandbox
        self.subagent_type, self.definition = spec.subagent_type, spec.definition
        parent_rules = parent.rules if parent is not None else ApprovalRules()
        self.rules = parent_rules.under(f"agent type {spec.subagent_type}", spec.definition.approvals)
        if parent is None:
            return
        self._upstream = parent.wait_for_reader  # it, too, acts only while its parent's consumer reads
        self._log = parent.child_log(self.agent_id, spec)

    def child_log(self, child_id: str, spec: ChildSpec) -> AgentLog | None:
        """Where a child of this agent is saved: its own transcript in this agent's session (None without one).

        A child resumed by `task(resume=…)` continues the transcript it had.
        """
        if self._log is None:
            return None
        if spec.agent_id is not None and self._log.has_saved_child(spec.agent_id):
            return self._log.resume_child(spec.agent_id, model=spec.config.model)
        return self._log.child(child_id, tool_call_id=spec.tool_call_id, prompt=spec.prompt, type=spec.subagent_type,
                               model=spec.config.model, sandbox=spec.sandbox.name)

    async def wait_for_reader(self) -> None:
        """Wait until whoever reads this turn's events (and, for a subagent, its parent's) has read them all."""
        reader = self._reader
        if reader is not None:
            await reader.caught_up()
        if self._upstream is not None:
            await self._upstream()

def _child_agent(tree: AgentTree, spec: ChildSpec) -> TreeMember:
    """The tree's factory: a subagent of `spec.parent_id` that shares `tree` (and its parent's session)."""
    child = Agent(spec.config, tree=tree, parent_id=spec.parent_id, agent_id=spec.agent_id)
    parent = tree.agents[spec.parent_id].agent
    child.take_child_setup(spec, parent if isinstance(parent, Agent) else None)
    return child
