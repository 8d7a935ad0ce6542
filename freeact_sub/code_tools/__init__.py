"""MCP tools as Python functions in an agent's kernel (`from mcptools.<server> import <tool>`).

- `generate`: the sources of the `mcptools` package, one typed function per tool;
- `packages`: `PackageShelf`, the packages of one agent tree, written once per tool set;
- `kernel_runtime`: the kernel side of a call (copied into the package as `_runtime.py`);
- `kernel_tasks`: subagents from code, the kernel side (`from freeact_sub_tasks import task, map_tasks`);
- `channel`: the private, authenticated Unix socket from one kernel to its agent;
- `bridge`: `CodeTools`, which ties them to one agent's kernel, MCP sessions and approvals.

`open_code_tools()`, `mcp_prompt()` and `tasks_prompt()` are what the agent calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .bridge import Ask, CodeTools, McpToolsMode, Tasks
from .generate import PACKAGE, TASKS_MODULE
from .packages import PackageShelf

if TYPE_CHECKING:
    from ..config.agent_config import AgentConfig
    from ..kernels.backends import KernelBackend
    from ..mcp.servers import McpConnections

__all__ = [
    "PACKAGE", "TASKS_MODULE", "Ask", "CodeTools", "McpToolsMode", "PackageShelf", "Tasks", "mcp_prompt",
    "open_code_tools", "tasks_prompt",
]


async def open_code_tools(
    *,
    agent_id: str,
    config: AgentConfig,
    kernel: KernelBackend,
    mcp: McpConnections,
    ask: Ask,
    packages: PackageShelf,
    allowed: Callable[[str], bool] | None = None,
    tasks: Tasks | None = None,
) -> CodeTools | None:
    """Start an agent's code tools, or None when it has nothing to call from code: its MCP tools are offered
    only as calls (or it has none) and it starts no subagents from code (`tasks` None).

    `allowed(qualified_name)` picks the tools the agent may use (its type's `tools` patterns); the
    others get no function, so code cannot reach them either. Kernels on a kernel gateway get
    none: the kernel could not reach this machine's tool socket. The package comes from the tree's
    `packages`, so agents with the same tools share one.
    """
    tools = [t for t in mcp.tools if allowed is None or allowed(t.qualified_name)]
    if config.mcp_tools == "calls":
        tools = []
    if (not tools and tasks is None) or config.kernel_gateway is not None:
        return None
    package = await packages.get(config.working_dir.resolve() / ".freeact-sub" / PACKAGE, tools)
    code_tools = CodeTools(
        agent_id=agent_id,
        kernel=kernel,
        mcp=mcp,
        ask=ask,
        package=package,
        call_timeout=config.execution_timeout,
        tools=tools,
        tasks=tasks,
    )
    try:
        await code_tools.start()
    except BaseException:
        await code_tools.close()
        raise
    return code_tools


def mcp_prompt(config: AgentConfig, mcp: McpConnections | None, code_tools: CodeTools | None) -> str:
    """The system prompt's section on MCP tools ("" without any)."""
    if mcp is None or not mcp.tools:
        return ""
    if code_tools is None or not code_tools.tools:
        return (
            "## MCP tools\nTools named `<server>_<tool>` come from MCP servers; call them directly when they "
            "fit the job."
        )
    return code_tools.prompt_section(config.mcp_tools)


def tasks_prompt(code_tools: CodeTools | None) -> str:
    """The system prompt's section on subagents from code ("" when the agent's code cannot start any)."""
    if code_tools is None or code_tools.tasks is None:
        return ""
    return (
        "## Subagents from code\n"
        f"Your code can start subagents too: `from {TASKS_MODULE} import task, map_tasks`. "
        "`await task(prompt, agent_type=..., output=Model)` returns the subagent's answer (text, or with "
        "`output` a pydantic model or JSON schema: that object). `await map_tasks(template, items, output=Model)` "
        "runs one subagent per item (the prompt is `template.format(item, item=item, **item)`) and returns "
        "the answers in order; a failed item's value is a `TaskError`, not raised. Use them to fan out "
        "over many rows or files and keep only what you need of the results."
    )
