"""MCP tools as Python functions in an agent's kernel (`from mcptools.<server> import <tool>`).

- `generate`: the sources of the `mcptools` package, one typed function per tool;
- `packages`: `PackageShelf`, the packages of one agent tree, written once per tool set;
- `kernel_runtime`: the kernel side of a call (copied into the package as `_runtime.py`);
- `channel`: the private, authenticated Unix socket from one kernel to its agent;
- `bridge`: `CodeTools`, which ties them to one agent's kernel, MCP sessions and approvals.

`open_code_tools()` and `mcp_prompt()` are what the agent calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .bridge import Ask, CodeTools, McpToolsMode
from .generate import PACKAGE
from .packages import PackageShelf

if TYPE_CHECKING:
    from ..config.agent_config import AgentConfig
    from ..kernels.backends import KernelBackend
    from ..mcp.servers import McpConnections

__all__ = ["PACKAGE", "Ask", "CodeTools", "McpToolsMode", "PackageShelf", "mcp_prompt", "open_code_tools"]


async def open_code_tools(
    *,
    agent_id: str,
    config: AgentConfig,
    kernel: KernelBackend,
    mcp: McpConnections,
    ask: Ask,
    packages: PackageShelf,
    allowed: Callable[[str], bool] | None = None,
) -> CodeTools | None:
    """Start an agent's code tools, or None when its MCP tools are offered only as calls (or it has none).

    `allowed(qualified_name)` picks the tools the agent may use (its type's `tools` patterns); the
    others get no function, so code cannot reach them either. Kernels on a kernel gateway get
    none: the kernel could not reach this machine's tool socket. The package comes from the tree's
    `packages`, so agents with the same tools share one.
    """
    tools = [t for t in mcp.tools if allowed is None or allowed(t.qualified_name)]
    if config.mcp_tools == "calls" or not tools or config.kernel_gateway is not None:
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
    if code_tools is None:
        return (
            "## MCP tools\nTools named `<server>_<tool>` come from MCP servers; call them directly when they "
            "fit the job."
        )
    return code_tools.prompt_section(config.mcp_tools)
