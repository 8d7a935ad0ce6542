"""What a started agent runs with: its kernel, MCP connections, tools, tool-call runner and subagent runner.

`start_parts` starts the kernel and connects the MCP servers concurrently, then assembles the
tools the model is offered (a server none of whose tools the agent may use is not started; an
agent that may not run code gets no kernel). `AgentParts.close` stops them all together.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..code_tools import CodeTools, mcp_prompt, open_code_tools, tasks_prompt
from ..config.agent_config import DEFAULT_SYSTEM_PROMPT, default_system_prompt
from ..config.agent_types import compose_system_prompt, task_tool
from ..config.definitions import GENERAL, AgentType
from ..config.prompt_files import PromptFiles
from ..events import Emit
from ..kernels.backends import KernelBackend
from ..kernels.cell_images import accepts_images
from ..kernels.pending import PendingKernel
from ..mcp.servers import McpConnections
from ..policy.gate import ApprovalGate
from ..subagents.from_code import CodeTasks
from ..subagents.runner import SubagentRunner
from ..tools import BUILTIN_TOOL_NAMES, Toolbox, ToolSpec, builtin_tool
from ..tools.names import server_may_offer, tool_allowed, unmatched_patterns
from ..tree.members import TreeMember
from .tool_calls import ToolCallRunner

if TYPE_CHECKING:

    from ..config.agent_config import AgentConfig
    from ..policy.approvals import ApprovalRules
    from ..tree.registry import AgentTree
    from .conversation import Conversation

__all__ = ["AgentParts", "Starter", "start_parts", "system_prompt"]


@dataclass
class AgentParts:
    """The running parts of one started agent."""

    mcp: McpConnections
    kernel: KernelBackend | None
    toolbox: Toolbox
    calls: ToolCallRunner
    subagents: SubagentRunner | None
    code_tools: CodeTools | None = None

    async def close(self, *, kernel_now: bool) -> None:
        """Stop everything together; `kernel_now`: kill the kernel at once (a subagent's: nobody can reach it)."""
        closers = []
        if self.code_tools is not None:
            closers.append(self.code_tools.close())
        if self.subagents is not None:
            closers.append(self.subagents.close())
        if self.kernel is not None:
            closers.append(self.kernel.shutdown(now=kernel_now))
        closers.append(self.mcp.close())
        await asyncio.gather(*closers, return_exceptions=True)


class Starter(TreeMember, Protocol):
    """The agent whose parts `start_parts` starts: besides what the tree knows of it, its tree, type and rules,
    where its decisions are saved, and where its `task_report` goes."""

    tree: AgentTree
    agent_type: str
    definition: AgentType | None
    rules: ApprovalRules
    report_to_parent: Callable[[str, Emit], None] | None

    @property
    def conversation(self) -> Conversation: ...
    @property
    def is_subagent(self) -> bool: ...


async def start_parts(
    agent: Starter, *, progress: Callable[[str], None] = lambda _: None,
    kernel_booting: asyncio.Task[KernelBackend] | None = None,
) -> AgentParts:
    """Start `agent`'s kernel and MCP connections and assemble its tools.

    `progress` is told, in a few words, what the start waits for as it goes (`starting the kernel and
    connecting the MCP servers: demo`, …). `kernel_booting` is a main agent's kernel already on its way (see
    `Agent.start`). Whatever started is stopped again if the start fails or is cancelled.
    """
    settings = agent.settings
    allowed = _allowed(settings)
    servers = {name: spec for name, spec in settings.mcp_servers.items()
               if server_may_offer(name, settings.tools, settings.disallowed_tools)}
    mcp = McpConnections(servers, cwd=settings.working_dir, pool=agent.tree.supplies.mcp_pool_for(agent.is_subagent),
                         listings=agent.tree.supplies.mcp_listings)
    kernel = await _kernel_and_mcp(agent, mcp, runs_code=allowed("execute_ipython_cell"), names=list(servers),
                                  progress=progress, kernel_booting=kernel_booting)
    subagents = None
    specs = [builtin_tool("execute_ipython_cell"), builtin_tool("reset_kernel")] if kernel else []
    if settings.enable_subagents and agent.tree.depth(agent.agent_id) < settings.max_depth and allowed("task"):
        specs.append(task_tool(agent.tree.agent_types, settings))
        specs += [builtin_tool(name) for name in ("task_output", "task_stop", "task_list", "task_send")]
        subagents = SubagentRunner(agent.tree, agent)
        if not agent.is_subagent:
            agent.tree.start()
    skills = agent.tree.prompt_files.seen_by(agent.definition, _ancestors(agent))
    if skills:
        specs.append(builtin_tool("load_skill"))  # a type's `tools` or `available_skills: []` can leave it out
    if agent.is_subagent and allowed("task_report"):
        specs.append(builtin_tool("task_report"))  # a type's `tools` list names it like any other tool
    if settings.mcp_tools != "code" or kernel is None:  # without a kernel, MCP tools are calls
        specs += [ToolSpec(name=t.qualified_name, description=t.description, parameters=t.input_schema)
                  for t in mcp.tools]
    toolbox = Toolbox([spec for spec in specs if allowed(spec.name)])
    gate = ApprovalGate(
        agent_id=agent.agent_id, approvals=agent.tree.approvals, toolbox=toolbox, rules=agent.rules, hooks=agent.hooks,
        hook_context=agent.hook_context, record=agent.conversation.shown,
        stopped_by=lambda: getattr(agent.tree.agents.get(agent.agent_id), "stopped_by", None),
    )
    if subagents is not None:
        subagents.jobs.ask = gate.ask  # a child's change set is decided at this agent's gate
    calls = ToolCallRunner(
        agent_id=agent.agent_id, config=settings, toolbox=toolbox, gate=gate, kernel=kernel, mcp=mcp,
        subagents=subagents, sandbox=agent.sandbox, model_sees_images=accepts_images(agent.model),
        report=agent.report_to_parent, skills=skills,
    )
    parts = AgentParts(mcp=mcp, kernel=kernel, toolbox=toolbox, calls=calls, subagents=subagents)
    try:
        if kernel is not None:
            progress("preparing the code tools in the kernel")
            parts.code_tools = await open_code_tools(
                agent_id=agent.agent_id, config=settings, kernel=kernel, mcp=mcp, ask=gate.ask,
                packages=agent.tree.supplies.code_packages, allowed=allowed,
                tasks=CodeTasks(subagents, gate.ask, agent.agent_id) if subagents is not None else None,
            )
        calls.code_tools = parts.code_tools
        _warn_unmatched_patterns(agent, [t.qualified_name for t in mcp.tools])
    except BaseException:  # warnings turned into errors too: nothing it started may outlive it
        await asyncio.shield(parts.close(kernel_now=agent.is_subagent))
        raise
    return parts


def _ancestors(agent: Starter) -> list[AgentType | None]:
    """The types of the agent's parent, its parent's parent, … (a child sees no skill they may not)."""
    found: list[AgentType | None] = []
    record = agent.tree.agents.get(agent.agent_id)
    while record is not None and record.parent_id is not None:
        record = agent.tree.agents.get(record.parent_id)
        if record is not None:
            found.append(getattr(record.agent, "definition", None))
    return found


def runs_code(settings: AgentConfig) -> bool:
    """Whether an agent with these settings gets a kernel (it may use `execute_ipython_cell`)."""
    return _allowed(settings)("execute_ipython_cell")


def _allowed(settings: AgentConfig) -> Callable[[str], bool]:
    return lambda name: tool_allowed(name, settings.tools, settings.disallowed_tools)


async def _kernel_and_mcp(
    agent: Starter, mcp: McpConnections, *, runs_code: bool, names: list[str], progress: Callable[[str], None],
    kernel_booting: asyncio.Task[KernelBackend] | None = None,
) -> KernelBackend | None:
    """Start the kernel (if the agent runs code) and open the MCP connections at the same time."""
    kernel_task: asyncio.Task[KernelBackend | None] = (
        kernel_booting or asyncio.create_task(_acquire_kernel(agent, runs_code)))
    mcp_task = asyncio.create_task(mcp.open())
    servers = ", ".join(names)

    def report(_: object = None) -> None:  # what is still awaited, each time one of the two ends
        waits = [*(["starting the kernel"] if runs_code and not kernel_task.done() else []),
                 *([f"connecting the MCP servers: {servers}"] if servers and not mcp_task.done() else [])]
        if waits:
            progress(" and ".join(waits))

    report()
    kernel_task.add_done_callback(report)
    mcp_task.add_done_callback(report)
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
        raise
    return kernel_task.result()


async def _acquire_kernel(agent: Starter, runs_code: bool) -> KernelBackend | None:
    """The agent's kernel; none for an agent that may not run code (no kernel process is started).

    A subagent's kernel is acquired in the background: its first model request does not wait for a
    kernel to boot, only its first cell does. The main agent's start waits for its kernel, so a kernel
    that cannot start is an error of `start()`.
    """
    if not runs_code:
        return None
    if agent.is_subagent:
        images = agent.settings.resolved_images_dir
        return PendingKernel(_child_kernel(agent), label=agent.agent_id, images_dir=images)
    return await agent.tree.acquire_kernel(agent.agent_id, agent.sandbox)


async def _child_kernel(agent: Starter) -> KernelBackend:
    kernel = await agent.tree.acquire_kernel(agent.agent_id, agent.sandbox)
    # the pools top up once this child has its kernel and its first model request is out, not ahead of them
    agent.tree.refill_after_first_request(agent.agent_id, agent.settings)
    return kernel


def _warn_unmatched_patterns(agent: Starter, mcp_tool_names: list[str]) -> None:
    """Warn of `tools` / `disallowed_tools` patterns that match no tool (silently they would change nothing)."""
    settings = agent.settings
    names = [*BUILTIN_TOOL_NAMES, *mcp_tool_names]
    allowed, denied = settings.tools, settings.disallowed_tools
    unstarted = [server for server in settings.mcp_servers if not server_may_offer(server, allowed, denied)]
    for field, patterns in (("tools", settings.tools or []), ("disallowed_tools", settings.disallowed_tools)):
        for pattern in unmatched_patterns(patterns, names, unstarted):
            where = f"agent type {agent.agent_type!r}" if agent.agent_type != GENERAL else "config"
            warnings.warn(
                f"{where}: {field} pattern {pattern!r} matches no tool of {agent.agent_id} "
                f"(its tools: {', '.join(names)})",
                UserWarning,
                stacklevel=2,
            )


def system_prompt(settings: AgentConfig, definition: AgentType | None, tool_names: list[str],
                  parts: AgentParts | None, files: PromptFiles | None = None) -> str:
    """An agent's system prompt: the configured one (the built-in one names only the tools the agent has), the
    instructions (`AGENTS.md`), its type's role, the skills it sees, then a section on its MCP tools."""
    base = settings.system_prompt
    names = set(tool_names) or {name for name in ("execute_ipython_cell", "task", "load_skill")
                                if _allowed(settings)(name)}
    if base == DEFAULT_SYSTEM_PROMPT:
        base = default_system_prompt(runs_code="execute_ipython_cell" in names, starts_subagents="task" in names)
    code_tools = parts.code_tools if parts else None
    sections = [mcp_prompt(settings, parts.mcp if parts else None, code_tools), tasks_prompt(code_tools)]
    tools_section = "\n\n".join(section for section in sections if section)
    seen = parts.calls.skills if parts is not None else None
    told, skills = (files or PromptFiles()).sections(definition, can_load="load_skill" in names, seen=seen)
    return compose_system_prompt(base, definition.prompt if definition else "", tools_section, instructions=told,
                                 skills=skills)
