"""`Agent`: one code-action agent and its lifecycle. It holds its parts: a `Conversation` (history and
session link), an `Inbox`, a `TurnEngine` (`turn.py`: each `stream()` turn, and the rules for faults and
cancellation) and, while started, its `AgentParts` (kernel, MCP connections, tools, tool-call runner).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..config.agent_config import AgentConfig
from ..config.definitions import GENERAL, AgentType
from ..events import AgentEvent, ContextCompacted
from ..policy.approvals import ApprovalPolicy, ApprovalRules
from ..policy.hooks import Hooks
from ..sandbox import BUILT_IN_PROFILES, SandboxProfile
from ..sandbox.import_guard import watch_agent
from ..tree.agent_ids import new_agent_id, reserve_agent_id
from ..tree.registry import AgentTree, ChildSpec, SubagentInfo, TreeMember
from ..usage import TreeUsage
from . import compaction, direct
from ._abandoned import release
from .conversation import Conversation, saved_main_agent
from .inbox import Inbox
from .main_type import check_cost_budget, choose_main_type, untrusted_project
from .parts import AgentParts, runs_code, start_parts, system_prompt
from .rewind import Rewinds
from .turn import TurnEngine
from .turn_owner import Budgets

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models import Model

    from ..config.commands import Command, CommandFiles
    from ..config.project_trust import ProjectPowers
    from ..events import Emit, Rewound
    from ..kernels.backends import KernelBackend
    from ..sessions import SessionStore
    from ..workspaces.checkpoints import Checkpoint

__all__ = ["Agent"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

class Agent:
    """A code-action agent with its own IPython kernel and its own MCP connections.

    Use it as an async context manager (or call `start()` and `stop()`), then iterate
    `stream(prompt)` once per user turn:

    ```python
    async with Agent(AgentConfig(model="openai:gpt-4.1")) as agent:
        async for event in agent.stream("What is 2**100?"):
            if isinstance(event, ApprovalRequest):
                event.approve(True)
    ```
    """

    config: AgentConfig
    """What it was made with (`settings` is that with its agent type applied)."""
    agent_id: str
    """This agent's id; every event it produces carries it."""
    parent_id: str | None
    """The id of the agent that started this one as a subagent (None for a main agent)."""
    agent_type: str
    """The agent type this agent runs as (`config.agent` for a main agent, the `task` call's for a subagent)."""
    definition: AgentType | None
    """Its type's definition (known after `start()` for a main agent)."""
    approvals: ApprovalPolicy
    """Standing decisions (approve everything from one agent, or from all); shared with subagents."""
    session_id: str | None
    """The id of the session this agent saves to (set at `start()`), or the one given to resume."""
    trust_project: bool | None
    """Whether the agent types in `<working_dir>/.freeact-sub/agents` that carry powers (hooks, endpoints, keys'
    names, MCP servers, `allow` rules, a wider sandbox) are used: True yes, False no (they are left out, the
    other types work), None (the default) only if the person trusts the folder, else `start()` raises a
    `ConfigError` naming each file and field. Read at `start()`."""

    def __init__(
        self,
        config: AgentConfig | None = None,
        *,
        agent_id: str | None = None,
        approvals: ApprovalPolicy | None = None,
        session: str | None = None,
        trust_project: bool | None = None,
    ) -> None:
        self._init(config, agent_id, approvals, session, trust_project)

    def _init(  # the constructor; a subagent (`_child_agent`) comes with its parent's tree and its `task` call's spec
        self, config: AgentConfig | None, agent_id: str | None, approvals: ApprovalPolicy | None, session: str | None,
        trust_project: bool | None, tree: AgentTree | None = None, spec: ChildSpec | None = None,
    ) -> None:
        self.config = config or AgentConfig()
        self.trust_project = trust_project
        self._settings: AgentConfig | None = None
        self.session_id = None
        saved_history: list[ModelMessage] = []
        if session is not None:
            self.session_id, agent_id, saved_history = saved_main_agent(session, self.config.working_dir, agent_id)
            reserve_agent_id(agent_id)
        self.agent_id = agent_id or new_agent_id()
        self.parent_id = spec.parent_id if spec is not None else None
        if tree is None:
            policy = approvals or ApprovalPolicy(approve_everything=self.config.auto_approve)
            tree = AgentTree(self, approvals=policy, factory=_child_agent)
            tree.register(self, parent_id=None)
        self.tree = tree
        """What this agent shares with the other agents of its tree (approvals, bound, kernel pool, registry)."""
        self.approvals = tree.approvals
        self.agent_type = GENERAL
        self.definition = None
        self.rules = ApprovalRules()
        """Allow / ask / deny rules: its type's, then its parent's type's, then `config.approvals`."""
        self.budgets = Budgets()
        """A subagent's budgets (tokens, tool calls, USD over its life); checked before each model request."""
        self.conversation = Conversation(saved_history)
        """Its history and where it is saved."""
        self.inbox = Inbox()
        """Messages sent to it while it works (the person's, its parent's), read at its next model request."""
        self.report_to_parent: Callable[[str, Emit], None] | None = None
        """A subagent's `task_report`: to its parent's next model request (set when its parent starts it)."""
        self._sandbox: SandboxProfile = BUILT_IN_PROFILES["off"]
        self._hooks: Hooks | None = None
        self.turns = TurnEngine(self)
        """Runs its turns and counts what they used."""
        self.rewinds = Rewinds(self)
        """A main agent's checkpoints before each turn, and rewinding to one (`rewind`, `checkpoints`)."""
        self._model: Model | None = None
        self._parts: AgentParts | None = None
        self._started = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._end_import_window: Callable[[], None] = lambda: None
        if tree is not None and spec is not None:
            self._become_child(tree, spec)

    def __del__(self) -> None:
        # Dropped while started (never stopped): end its processes rather than leak them, and say so.
        if getattr(self, "_started", False):
            release(self, self._loop)

    def _become_child(self, tree: AgentTree, spec: ChildSpec) -> None:
        """Set this new agent up as the child `spec` describes, before `start()`.

        It continues `spec.history` (resume, fork), is told `spec.note` first, keeps the budgets,
        type, rules and sandbox the `task` call resolved, acts only while its parent's stream is
        read, is saved in its parent's session and reports (`task_report`) to its parent.
        """
        if spec.history is not None:
            self.conversation.continue_from(spec.history)
        self.turns.first_note = spec.note
        self.budgets = Budgets(max_tokens=spec.max_tokens, max_tool_calls=spec.max_tool_calls, max_cost=spec.max_cost)
        self._sandbox = spec.sandbox
        self.agent_type, self.definition = spec.agent_type, spec.definition
        parent = tree.agents[spec.parent_id].agent
        parent_rules = parent.rules if isinstance(parent, Agent) else ApprovalRules()
        self.rules = parent_rules.under(f"agent type {spec.agent_type}", spec.definition.approvals)
        if isinstance(parent, Agent):
            self.turns.upstream = parent.turns.wait_for_reader  # it, too, acts only while its parent's consumer reads
            self.conversation.log = parent.conversation.child_log(self.agent_id, spec)
            if parent.started and parent.parts.subagents is not None:  # the runner that starts this child
                self.report_to_parent = parent.parts.subagents.reporter(self.agent_id)

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
    def parts(self) -> AgentParts:
        """Its running parts: kernel, MCP connections, tools, tool-call and subagent runners (after `start()`)."""
        if self._parts is None:
            raise RuntimeError("the agent is not running: its parts start in `start()`")
        return self._parts

    @property
    def kernel(self) -> KernelBackend | None:
        """This agent's kernel while it runs."""
        return self._parts.kernel if self._parts is not None else None

    def own_processes(self) -> list[int]:
        """PIDs of the processes this agent started and owns: its kernel (the process's kernel zygote, which every
        agent of the process shares, is not one of them)."""
        return [self.kernel.pid] if self.kernel is not None and self.kernel.pid is not None else []

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered to the model (after `start()`)."""
        return self._parts.toolbox.names if self._parts is not None else []

    @property
    def system_prompt(self) -> str:
        """The system prompt this agent sends: the configured one, its type's role, then a section on its MCP tools."""
        return system_prompt(self.settings, self.definition, self.tool_names, self._parts, self.tree.prompt_files)

    @property
    def usage(self) -> TreeUsage:
        """Tokens and cost so far, per agent id and for the tree (this agent and every subagent).

        `agent.usage.total.total_tokens`, `agent.usage.of("agent-3fa2").cost` (USD; None: price unknown)."""
        return self.tree.usage.snapshot()

    @property
    def history(self) -> list[ModelMessage]:
        """A copy of the conversation so far (pydantic-ai messages)."""
        return list(self.conversation.messages)

    async def start(self, *, progress: Callable[[str], None] | None = None) -> None:
        """Check the model, start the kernel, then build the model and connect the MCP servers while it boots.

        A main agent launches its kernel, and builds its model (which may import the provider's SDK: seconds of
        CPU) in a thread while the kernel boots in its own process; a model that cannot be built stops that kernel
        again. A subagent resolves its model first; its kernel comes from its tree's pool. `progress`, if
        given, is told in a few words what the start waits for as it goes (`loading the model`, `starting
        the kernel and connecting the MCP servers: demo`, …), for a front end to show while a person waits.
        """
        if self._started:
            return
        report = progress or (lambda _: None)
        self._loop = asyncio.get_running_loop()
        if not self.is_subagent:
            self.config.make_working_dir()
            self.config.make_state_dir()  # a read-only working folder is one clear error, not a traceback mid-start
            self._take_main_type()  # a bad type file or field is a ConfigError before any kernel starts
        report("loading the model")
        if self.is_subagent:
            self._model = self.settings.resolve_model()
        else:
            self.settings.check_model()  # a missing key, an unknown prefix: a ConfigError before any kernel starts
            self.tree.start_telemetry(self.settings)
            # from now until its kernels stop, what they could write is not imported by this process unchecked
            self._end_import_window = watch_agent(self.settings.working_dir, self._sandbox)
        booting: asyncio.Task[KernelBackend] | None = None
        try:
            if not self.is_subagent:
                booting = self._boot_kernel()
                # the session exists before the first wait: an ACP client handed its id may load it at once
                self.conversation.reserve(self.settings.working_dir, session_id=self.session_id,
                                          save=self.settings.save_sessions)
                self._model = await self._resolve_model(booting)
                settings = self.settings
                check_cost_budget(self.config, settings, self._model)
                self.session_id = self.conversation.open(settings.working_dir, self.agent_id,
                                                         session_id=self.session_id, save=settings.save_sessions,
                                                         model=self._model)
            parts_starting, booting = start_parts(self, progress=report, kernel_booting=booting), None
            self._parts = await parts_starting  # from here on, `start_parts` stops what it started if it fails
        except BaseException:
            if booting is not None:
                await asyncio.shield(_stop_booting(booting))
            if not self.is_subagent:
                await asyncio.shield(self.tree.close())
                self._end_import_window()
            self.conversation.close("failed", turns=self.turns.turns_used)
            raise
        self._started = True


    def _boot_kernel(self) -> asyncio.Task[KernelBackend] | None:
        """A main agent's kernel, booting from now on (None: it runs no code)."""
        if not runs_code(self.settings):
            return None
        return asyncio.create_task(self.tree.acquire_kernel(self.agent_id, self._sandbox), name="main-kernel")

    async def _resolve_model(self, booting: asyncio.Task[KernelBackend] | None) -> Model:
        """The model, checked already. Building it may import the provider's SDK (pydantic-ai and `openai`: seconds
        of CPU): while a kernel boots, that happens in a thread, and the kernel boots in its own process beside it."""
        if booting is None:
            return self.settings.resolve_model()
        return await asyncio.to_thread(self.settings.resolve_model)

    @property
    def sandbox(self) -> SandboxProfile:
        """The sandbox profile this agent's kernel runs under (`off` until a main agent has started)."""
        return self._sandbox

    @property
    def hooks(self) -> Hooks:
        """The hooks that apply to this agent: the config's, plus its agent type's own."""
        if self._hooks is None:
            own = self.definition.hooks if self.definition is not None else {}
            self._hooks = self.tree.hooks.plus(own, self.agent_type) if own else self.tree.hooks
        return self._hooks

    def hook_context(self) -> dict[str, Any]:
        """The fields of every hook payload about this agent."""
        return {
            "agent_id": self.agent_id,
            "parent_id": self.parent_id,
            "agent_type": self.agent_type,
            "subagent_type": self.agent_type,  # the same, under the name hooks had before `agent_type`
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
        return None if self.trust_project is not None or self.is_subagent else untrusted_project(self.config)

    def _take_main_type(self) -> None:
        chosen = choose_main_type(self.config, self.tree, trust_project=self.trust_project)
        self._sandbox, self.agent_type, self.definition = chosen.sandbox, chosen.name, chosen.definition
        self._settings, self.rules, self._hooks = chosen.settings, chosen.rules, None

    async def stop(self) -> None:
        """Cancel a running turn, stop subagents, shut the kernel down and close MCP connections."""
        await self.turns.end()
        await self.rewinds.close()
        parts, self._parts, self._started = self._parts, None, False
        # A subagent's kernel dies with it: nobody can reach its state any more, so it is killed at once.
        closing = [parts.close(kernel_now=self.is_subagent)] if parts is not None else []
        closing += [] if self.is_subagent else [self.tree.supplies.mcp_pool.close()]  # the pool's beside its own
        await asyncio.shield(asyncio.gather(*closing, return_exceptions=True))
        if not self.is_subagent:
            await asyncio.shield(self.tree.close())
            self._end_import_window()
            self.conversation.close("stopped", turns=self.turns.turns_used)

    def keep_session(self) -> None:
        """Keep this main agent's new session even if no prompt ever reaches it: an ACP client is handed its id at
        `session/new` and may load it, empty, in another process. Before `start()`, the session is kept from its
        creation on; without a session (`save_sessions` off), it has no effect."""
        self.conversation.keep()

    def name_new_session(self, session_id: str, store: SessionStore | None = None) -> None:
        """Before `start()`: make this main agent's new session under `session_id`, an id from
        `freeact_sub.sessions.store.new_session_id()` handed out before the agent started (ACP's `session/new` is
        answered so); `start()` raises `SessionError` if a session of that id exists already. `store`: that session,
        made already (`SessionStore.create(working_dir, session_id)`); the agent takes it over."""
        self.conversation.new_id = session_id
        if store is not None:
            self.conversation.adopt(store)

    # -- a turn ----------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the current turn promptly: the model stream, approval waits, running cells, subagents."""
        self.turns.cancel()

    def cancel_subagent(self, agent_id: str) -> bool:
        """Stop one subagent of this agent's tree, at any depth, in the foreground or the background: its parent's
        `task` result says the user stopped it, its siblings go on. False if no such subagent is running."""
        return self.tree.cancel(agent_id, by="the user")

    def subagents(self) -> list[SubagentInfo]:
        """Every live subagent of this agent's tree: id, parent, type, state, turns, elapsed, tokens, cost."""
        return self.tree.subagents()

    def send(self, agent_id: str, text: str) -> None:
        """Send your message to a running subagent of this agent's tree (at any depth).

        It reads it at its next model request (queued while a round runs), marked as yours, and
        goes on working; a `SubagentMessage` event records it. Raises `ValueError` for an empty
        message or an id that is no running subagent (one that ended is resumed by its parent).
        """
        self.tree.send(agent_id, text)

    async def background_events(self) -> AsyncGenerator[AgentEvent, None]:
        """The events of background subagents that arrive while no `stream()` runs, for the agent's life.

        Iterate it in a task of its own next to your `stream()` calls: during a turn background
        events come through `stream()`, between turns through this iterator — above all their
        `ApprovalRequest`s, which wait for your answer as any other. It ends when the agent stops.
        """
        async for event in self.tree.background.iterate():
            yield event

    async def stream(
        self, prompt: str, max_turns: int | None = None, *, agent_type: str | None = None,
        model: str | Model | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run one user turn and yield its events as they happen (subagents' events included).

        `max_turns` bounds the model rounds (one model response plus its tool calls) of this turn;
        default `config.max_turns`. Raises `ModelError` if the model request fails.

        `agent_type="explore"` runs the turn as your own `task` call instead (what `@explore …`
        does in the terminal and the notebook): that type starts as a subagent of this agent with
        `prompt` as its job, asked and approved as any `task` call, and its answer goes into this
        agent's history as the call's result. `model` is the model of this turn (of that subagent,
        with `agent_type`). A type this agent cannot start raises `ValueError`, an unknown
        model `ConfigError`, before the turn begins.

        The turn goes only as far as you read: it starts a model round or a round of tool calls
        only once you have taken every event so far. Leaving the loop early (`break`) leaves the
        turn waiting; closing the stream (`contextlib.aclosing`, `await events.aclose()`) or the
        next `stream()` call ends it as cancelled. A `stream()` call while a turn is unfinished
        ends that turn first (its consumer, if still reading, gets `RunCancelled`).
        """
        if (bad := _LONE_SURROGATE.search(prompt)) is not None:  # no file, JSON body or model can carry one
            raise ValueError(f"the prompt is not valid Unicode text: character {bad.start() + 1} is a lone surrogate "
                             "(a byte that was not UTF-8, as Python reads one); replace it, e.g. with U+FFFD")
        if not self._started:
            raise RuntimeError("the agent is not running: use `async with agent:` or call `await agent.start()`")
        turn_model, child_model = None, None
        if agent_type is not None:
            parts = self.parts
            can_start = parts.subagents is not None and "task" in parts.toolbox
            child_model = direct.check_direct(can_start, agent_type, model, self.tree.agent_types)
        elif model is not None:
            turn_model = self.settings.model_copy(update={"model": model}).resolve_model()
        limit = max_turns if max_turns is not None else self.settings.max_turns
        background = self.tree.background if not self.is_subagent else None
        events = self.turns.stream(prompt, limit, agent_type=agent_type, model=child_model,
                                   turn_model=turn_model, background=background)
        async with contextlib.aclosing(events):  # closing this stream ends the turn at once
            async for event in events:
                yield event

    async def compact(self, focus: str | None = None) -> ContextCompacted | None:
        """Compact now, between turns (`/compact [focus]`): older rounds become a summary; the event, or None."""
        return await compaction.between_turns(self, focus)

    def checkpoints(self) -> list[Checkpoint]:
        """The checkpoints this agent can `rewind` to, oldest first: one before each turn (a model response and
        its calls), each with the files that turn changed (through code, subprocesses, `pip` alike)."""
        return self.rewinds.checkpoints()

    async def rewind(self, turn: int) -> Rewound:
        """Go back to before turn `turn` (a `Checkpoint.number`): its files and its conversation.

        The folder's files are written back to what they were (no link followed; nothing outside the folder is
        written), the conversation is cut back to that point, and the kernel is restarted (its state cannot go
        back); the model is told so in its next request. A checkpoint of the present is taken first, so
        `rewind(event.undo)` undoes this. Returns the event that says what was restored. `ValueError` for no
        such checkpoint; `RuntimeError` while a run or a subagent is under way, or without checkpoints (the
        reason is given: `checkpoints = false`, a folder over `checkpoint_limit`).
        """
        return await self.rewinds.rewind(turn)

    # -- the person's commands and `@type` prompts --------------------------------------------

    def commands(self) -> dict[str, Command]:
        """The person's and the project's commands that can run (`.freeact-sub/commands/*.md`), read afresh."""
        return self.command_files().commands

    def command_files(self) -> CommandFiles:
        """The command files, read afresh: the good commands and each bad file's problems (every field named)."""
        return direct.command_files(self.settings.working_dir, self.tree.agent_types)

    def read_prompt(self, text: str, *, reserved: Iterable[str] = ()) -> tuple[str, str | None, str | None]:
        """What a person's prompt asks for, as `(prompt, agent_type, model)` (see `direct.read_prompt`)."""
        return direct.read_prompt(text, self.settings.working_dir, self.tree.agent_types, reserved=reserved)

    def stream_command(
        self, name: str, arguments: str = "", max_turns: int | None = None
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the command `name` with `arguments` as one turn (what `/name arguments` does in the terminal).

        A command with an `agent` runs as a subagent of that type; its `model` is the model of the
        turn. `ConfigError` for an unknown command or a bad file.
        """
        command = self.command_files().get(name)
        return self.stream(command.prompt(arguments), max_turns, agent_type=command.agent, model=command.model)


async def _stop_booting(booting: asyncio.Task[KernelBackend]) -> None:
    """Stop a kernel that was booting for a start that failed (nothing it started may outlive it)."""
    if not booting.done():
        booting.cancel()
    with contextlib.suppress(BaseException):
        kernel = await booting
        await kernel.shutdown()


def _child_agent(tree: AgentTree, spec: ChildSpec) -> TreeMember:
    """The tree's factory: a subagent of `spec.parent_id` that shares `tree` (and its parent's session)."""
    child = Agent.__new__(Agent)
    child._init(spec.config, spec.agent_id, None, None, None, tree=tree, spec=spec)
    return child
