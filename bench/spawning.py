"""What the subagent benchmarks share: a scripted parent that starts children, timing one spawn, waiting for
warm pools, and reading processes (alive, and the memory of this process and all under it)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall

from freeact_sub import Agent, ApprovalRequest

__all__ = [
    "CALC_SERVER", "SpawnScript", "alive", "cell_children", "first_prompt", "timed_spawn", "tree_pss", "wait_for_pool",
]

CALC_SERVER = Path(__file__).resolve().parent.parent / "tests" / "servers" / "calc_server.py"


def first_prompt(messages: list[ModelMessage]) -> str:
    for part in messages[0].parts:
        if isinstance(part, UserPromptPart) and isinstance(part.content, str):
            return part.content
    return ""


class SpawnScript:
    """Parent: one round of `task` calls, then done. Child: note the time of its first request, answer at once."""

    def __init__(self, children: int, child_code: str | None = None, agent_type: str = "general") -> None:
        self.children = children
        self.child_code = child_code
        self.agent_type = agent_type
        self.first_request: dict[str, float] = {}

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
        prompt = first_prompt(messages)
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if prompt.startswith("child"):
            self.first_request.setdefault(prompt, time.perf_counter())
            if self.child_code and not returns:
                yield {0: DeltaToolCall(name="execute_ipython_cell", json_args=json.dumps({"code": self.child_code}),
                                        tool_call_id="cell")}
            else:
                yield "child done"
            return
        if returns:
            yield "parent done"
            return
        yield {
            i: DeltaToolCall(name="task", tool_call_id=f"task-{i}",
                             json_args=json.dumps({"prompt": f"child {i}", "subagent_type": self.agent_type}))
            for i in range(self.children)
        }


async def timed_spawn(agent: Agent, script: SpawnScript) -> float:
    """One parent turn that starts one child: seconds from approving the `task` call to the child's first request."""
    script.first_request.clear()
    approved_at = 0.0
    async for event in agent.stream("spawn one"):
        if isinstance(event, ApprovalRequest):
            if event.tool_name == "task":
                approved_at = time.perf_counter()
            event.approve(True)
    return script.first_request["child 0"] - approved_at


async def wait_for_pool(agent: Agent) -> None:
    """Start the tree's pools (they start when the first child is near) and wait until the kernel pool and the MCP
    pool (every configured server) are full."""
    tree, config = agent.tree, agent.config
    tree.supplies.warm_up()

    def warm() -> bool:
        mcp_ready = all(tree.supplies.mcp_pool.ready(name, spec, config.working_dir) >= config.mcp_pool_size
                        for name, spec in config.mcp_servers.items())
        return tree.supplies.pool.ready >= config.kernel_pool_size and mcp_ready

    while not warm():  # noqa: ASYNC110 - polling the pools' counters
        await asyncio.sleep(0.05)


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def tree_pss() -> float:
    """MiB of PSS of this process and every process under it."""
    import psutil

    total = 0
    for process in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        try:
            total += process.memory_full_info().pss
        except psutil.Error:
            continue
    return total / 2**20


def cell_children(children: int, cell: float, *, background: bool, parent_done: str = "parent done") -> Any:
    """A model script: the parent starts `children` children at once (in the background or not), each runs one cell
    of `cell` seconds and answers `child done`; the parent then answers `parent_done`."""
    code = f"import time; time.sleep({cell})"

    async def script(messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
        prompt = first_prompt(messages)
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if prompt.startswith("child"):
            if returns:
                yield "child done"
            else:
                yield {0: DeltaToolCall(name="execute_ipython_cell", json_args=json.dumps({"code": code}),
                                        tool_call_id="cell")}
        elif returns:
            yield parent_done
        else:
            yield {i: DeltaToolCall(name="task", tool_call_id=f"task-{i}", json_args=json.dumps(
                {"prompt": f"child {i}", "run_in_background": background})) for i in range(children)}

    return script
