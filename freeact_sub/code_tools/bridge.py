"""`CodeTools`: one agent's MCP tools as Python functions in that agent's own kernel.

It takes the generated `mcptools` package of its tool set (written once per tree, see
`packages`), opens the agent's private `Channel`, connects its kernel to it with its first cell
(again after every kernel restart), and runs each call
that code makes: check the arguments against the tool's schema, ask for approval exactly like a
direct call (an `ApprovalRequest` with `source="code"` and the cell's call id), call the tool
on this agent's own MCP session, and send the result back to the waiting cell. Calls belong to
the cell that makes them: when the cell ends, is cancelled or the agent stops, calls still
pending end with `ToolCancelled` in the kernel. Time spent waiting for a decision does not count
against the cell's execution timeout.

Requests of `freeact_sub_tasks` (`{"kind": "task" | "map", ...}`) go to the agent's `tasks` handler
(the subagent runner's, injected: this floor knows no subagents), with the cell's call id and emit; the
time their subagents run does not count against the cell's timeout either.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import textwrap
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..events import ApprovalRequest, Emit, ToolOutput
from ..tools import Toolbox, ToolSpec
from .channel import Channel
from .generate import PACKAGE, TASKS_MODULE, GeneratedModule
from .packages import SharedPackage

if TYPE_CHECKING:
    from ..kernels.backends import KernelBackend
    from ..kernels.cells import ExecutionResult, OutputCallback
    from ..mcp.connection import McpTool
    from ..mcp.servers import McpConnections

__all__ = ["Ask", "CodeTools", "McpToolsMode", "Tasks"]

_CELL_GRACE = 2.0
"""Seconds a cancelled cell may take to end by itself after its pending calls were cancelled."""

McpToolsMode = Literal["calls", "code", "both"]
Ask = Callable[..., Awaitable[ApprovalRequest]]
"""`ask(tool_name, arguments, call_id, emit, *, source, cell_call_id)`: the agent's approval step.

It returns the request once it is decided."""
Tasks = Callable[[dict[str, Any], str, Emit], Awaitable[dict[str, Any]]]
"""`tasks(request, cell_call_id, emit)`: runs a `freeact_sub_tasks` request from a cell; returns the reply."""


@dataclass
class _Cell:
    call_id: str
    emit: Emit


class _PauseClock:
    """Seconds during which at least one call waited for approval (overlapping waits count once)."""

    def __init__(self) -> None:
        self._total = 0.0
        self._waiting = 0
        self._since = 0.0

    def paused(self) -> float:
        return self._total + (time.monotonic() - self._since if self._waiting else 0.0)

    @contextlib.contextmanager
    def pause(self) -> Any:
        if not self._waiting:
            self._since = time.monotonic()
        self._waiting += 1
        try:
            yield
        finally:
            self._waiting -= 1
            if not self._waiting:
                self._total += time.monotonic() - self._since


class CodeTools:
    """Generated MCP tool modules plus the channel their calls travel through, for one agent."""

    def __init__(
        self,
        *,
        agent_id: str,
        kernel: KernelBackend,
        mcp: McpConnections,
        ask: Ask,
        package: SharedPackage,
        call_timeout: float | None = None,
        tools: list[McpTool] | None = None,
        tasks: Tasks | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.kernel = kernel
        self.mcp = mcp
        self.shared = package
        self.root = package.root
        """The folder put on the kernel's `sys.path`; the package is `root / "mcptools"`."""
        self.modules: list[GeneratedModule] = package.modules
        """The generated modules, one per server."""
        self._ask = ask
        self.tasks = tasks
        """Runs the subagents a cell starts (`freeact_sub_tasks`); None: this agent starts none from code."""
        self._call_timeout = call_timeout
        offered = mcp.tools if tools is None else tools
        self.tools = offered
        """The MCP tools this agent's code may call (all of its servers' tools, or those its type allows)."""
        self._tools: dict[tuple[str, str], McpTool] = {(t.server, t.name): t for t in offered}
        self._toolbox = Toolbox(
            ToolSpec(name=t.qualified_name, description=t.description, parameters=t.input_schema)
            for t in offered
        )
        self._channel = Channel(self._handle)
        self._cell: _Cell | None = None
        self._clock: _PauseClock | None = None
        self._connected = False
        self._numbers = itertools.count(1)

    @property
    def package(self) -> Path:
        """The generated package's folder (the model can list and read it)."""
        return self.root / PACKAGE

    @property
    def channel(self) -> Channel:
        return self._channel

    async def start(self) -> None:
        """Nothing to start: the channel opens with the first cell (the package is the tree's: written before,
        removed when the tree closes)."""

    async def close(self) -> None:
        """End pending calls with `ToolCancelled` and close the channel."""
        await self._channel.close("the agent stopped")

    # -- cells --------------------------------------------------------------------------------

    async def execute(
        self,
        code: str,
        *,
        call_id: str,
        emit: Emit,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecutionResult:
        """Run a cell whose code may call MCP tools; waits for approvals are not counted against `timeout`."""
        await self._connect_kernel()
        clock = _PauseClock()
        self._cell, self._clock = _Cell(call_id, emit), clock
        execution = asyncio.ensure_future(
            self.kernel.execute(code, timeout=timeout, on_output=on_output, paused=clock.paused)
        )
        try:
            return await asyncio.shield(execution)
        except asyncio.CancelledError:
            # Pending calls end first, with ToolCancelled in the cell, which then has a moment to end by
            # itself (its traceback names the cancelled call); only then is it interrupted. A cell with no
            # call pending is interrupted at once.
            try:
                if await self._channel.end_calls("the turn was cancelled"):
                    await asyncio.wait({execution}, timeout=_CELL_GRACE)
            finally:
                execution.cancel()
                with contextlib.suppress(BaseException):
                    await execution
            raise
        finally:
            self._cell = self._clock = None
            self._channel.cancel_calls("the cell that made this call has ended")

    async def _connect_kernel(self) -> None:
        """Give the kernel the channel's path and secret with its first cell, and (the kernel sees to it) after
        every restart. An agent that never runs a cell costs its kernel nothing; one that does is not made to
        wait for the set-up's round trip (the kernel runs it just before the cell)."""
        if self._connected:
            return
        self._connected = True
        kernel = self.kernel
        self._channel.open(lambda: kernel.tools_socket)
        await kernel.run_at_start(self._setup_code(), wait=False)

    def _setup_code(self) -> str:
        return (
            "def _freeact_sub_connect():\n"
            "    import importlib, sys\n"
            f"    root = {str(self.root)!r}\n"
            "    if root not in sys.path:\n"
            "        sys.path.insert(0, root)\n"
            "    importlib.invalidate_caches()\n"
            f"    ours = {(PACKAGE, TASKS_MODULE)!r}\n"
            f"    for name in [n for n in sys.modules if n in ours or n.startswith({PACKAGE + '.'!r})]:\n"
            "        del sys.modules[name]\n"
            f"    from {PACKAGE} import _runtime\n"
            f"    _runtime.configure({self._channel.secret!r})\n"
            "_freeact_sub_connect()\n"
            "del _freeact_sub_connect\n"
        )

    # -- one call -----------------------------------------------------------------------------

    async def _handle(self, request: dict[str, Any]) -> dict[str, Any]:
        cell, clock = self._cell, self._clock
        if request.get("kind") in ("task", "map"):
            if self.tasks is None:
                return _failure("tool_error", "this agent cannot start subagents (its type, depth or settings)")
            if cell is None or clock is None:
                return _failure("cancelled", "subagents can be started from code only while a cell runs")
            with clock.pause():  # its subagents' time is not the cell's
                return await self.tasks(request, cell.call_id, cell.emit)
        server, name, arguments = request.get("server"), request.get("tool"), request.get("arguments")
        tool = self._tools.get((server, name)) if isinstance(server, str) and isinstance(name, str) else None
        if tool is None:
            return _failure("tool_error", f"the MCP server {server!r} has no tool {name!r} for this agent")
        if cell is None or clock is None:
            return _failure("cancelled", "MCP tools can be called only while a cell runs")
        if not isinstance(arguments, dict):
            return _failure("arguments", f"the arguments of {name!r} must be a dict")
        qualified = tool.qualified_name
        if problem := self._toolbox.check(qualified, arguments):
            return _failure("arguments", problem.replace(f"{qualified!r}", f"{tool.server}.{tool.name}"))
        arguments = self._toolbox.with_defaults(qualified, arguments)
        call_id = f"{cell.call_id}/code-{next(self._numbers)}"
        with clock.pause():
            decided = await self._ask(
                qualified, arguments, call_id, cell.emit, source="code", cell_call_id=cell.call_id
            )
        if not await decided.approved():
            because = f": {decided.reason}" if decided.reason else ""
            message = f"the call to {tool.server}.{tool.name} was not approved{because}; it did not run"
            return _failure("rejected", message)
        arguments = decided.tool_args  # as a PreToolUse hook may have rewritten them
        result = await self.mcp.call_result(qualified, arguments, timeout=self._call_timeout)
        cell.emit(
            ToolOutput(
                agent_id=self.agent_id,
                content=result.text,
                tool_name=qualified,
                tool_call_id=call_id,
                is_error=result.is_error,
                source="code",
                cell_call_id=cell.call_id,
            )
        )
        if result.is_error:
            return _failure("tool_error", result.text or f"{tool.server}.{tool.name} failed")
        return {
            "ok": True,
            "text": result.text,
            "has_structured": result.structured is not None,
            "structured": result.structured,
        }

    # -- what the model is told ----------------------------------------------------------------

    def prompt_section(self, mode: McpToolsMode) -> str:
        """The system prompt's paragraph about MCP tools in `mode` (made once per package and mode)."""
        known = self.shared.prompts.get(mode)
        if known is None:
            known = self.shared.prompts[mode] = self._prompt_section(mode)
        return known

    def _prompt_section(self, mode: McpToolsMode) -> str:
        listing = "\n".join(
            f"- `{PACKAGE}.{m.module}` (server `{m.server}`): {', '.join(m.functions)}" for m in self.modules
        )
        text = (
            f"Your MCP tools are also Python functions in your kernel: `from {PACKAGE}.<module> import <tool>`, "
            "then call it with keyword arguments. Its return value is the tool's structured result (a dict, "
            "or the plain value) or else its text. Each call is approved like any tool call; a call that is "
            "not approved raises `mcptools.ToolRejected`, a failing tool `mcptools.ToolError`. Prefer calling "
            "tools from code for loops, several calls, or results you want to filter before reading them. "
            f"The modules are real files in `{self.package}`: read a module's source (signatures and "
            "docstrings) before you use it, only for the tools you need.\n"
            f"Modules and tools:\n{listing}"
        )
        if mode == "code":
            text = text.replace("are also Python", "are Python", 1)
        else:
            text = "You can call MCP tools directly as tools named `<server>_<tool>`. " + text
        paragraph, _, modules = text.partition("\nModules and tools:\n")
        wrapped = textwrap.fill(paragraph, 96, break_long_words=False, break_on_hyphens=False)
        return f"## MCP tools\n{wrapped}\nModules and tools:\n{modules}"


def _failure(kind: str, message: str) -> dict[str, Any]:
    """A reply that raises in the cell: `kind` picks the exception (see `kernel_runtime`)."""
    return {"ok": False, "error": kind, "message": message}
