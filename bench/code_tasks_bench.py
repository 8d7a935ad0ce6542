"""Subagents from code against `task` tool calls (issue 33): N children, each running one cell of a fixed length,
started by one cell (`map_tasks`) or by N `task` calls in one response, in the same run.

    python -m bench.code_tasks_bench [--children 50] [--bound 10] [--cell 0.5] [--runs 1]

Measured for each: the wall time of the parent's turn, whether every child answered, the input tokens of
the parent's second model request (the one that reads the results) and the characters of the results it
read. The scripted model counts tokens as pydantic-ai's `FunctionModel` estimates them (words), so the
token numbers compare the two ways with each other, not with a provider's bill.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from bench.spawning import cell_children, first_prompt, wait_for_pool
from freeact_sub import Agent, AgentConfig, CodeExecutionOutput, ToolOutput

__all__ = ["CodeTasksRun", "code_tasks_run", "compare"]


@dataclass
class CodeTasksRun:
    """One parent turn that fans out."""

    wall: float
    done: int
    """Children whose answer was `child done`."""
    results_input_tokens: int
    """The input tokens of the parent's request that read the results."""
    first_input_tokens: int
    """The input tokens of the parent's first request (the same prompt both ways)."""
    results_chars: int
    """Characters of tool results in the parent's request that read them."""


def map_cell_parent(children: int, cell: float) -> Any:
    """The parent's model: one cell that maps `children` items through children; the children as in `cell_children`."""
    child_script = cell_children(children, cell, background=False)
    code = ("from freeact_sub_tasks import map_tasks\n"
            f"out = await map_tasks('child {{}}', range({children}))\n"
            "print(sum(o == 'child done' for o in out), 'of', len(out), 'children done')")

    async def script(messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
        if first_prompt(messages).startswith("child"):
            async for item in child_script(messages, info):
                yield item
        elif any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            yield "parent done"
        else:
            yield {0: DeltaToolCall(name="execute_ipython_cell", json_args=json.dumps({"code": code}),
                                    tool_call_id="map")}

    return script


async def code_tasks_run(children: int, bound: int, cell: float, *, from_code: bool) -> CodeTasksRun:
    """One run: `children` children of one `cell`-second cell each under `bound`, from one cell or from `task` calls."""
    script = map_cell_parent(children, cell) if from_code else cell_children(children, cell, background=False)
    results: list[str] = []

    async def recording(messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
        if not first_prompt(messages).startswith("child"):
            results[:] = [p.model_response_str() for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        async for item in script(messages, info):
            yield item

    with tempfile.TemporaryDirectory() as work:
        config = AgentConfig(model=FunctionModel(stream_function=recording), working_dir=work, max_subagents=bound,
                             auto_approve=True, save_sessions=False)
        async with Agent(config) as agent:
            await wait_for_pool(agent)
            ledger, me = agent.tree.usage, agent.agent_id
            first = None
            done = 0
            began = time.perf_counter()
            async for event in agent.stream("fan out"):
                if first is None and event.agent_id == me and isinstance(event, ToolOutput | CodeExecutionOutput):
                    first = ledger.of(me)  # its first response is in: what its first request cost
                if isinstance(event, ToolOutput) and event.agent_id == me and event.tool_name == "task":
                    done += event.content == "child done"
                if isinstance(event, CodeExecutionOutput) and event.agent_id == me:
                    done += int(event.text.split()[0]) if event.text.split()[0].isdigit() else 0
            wall = time.perf_counter() - began
            total = ledger.of(me)
    first_input = first.input_tokens if first is not None else 0
    return CodeTasksRun(wall=wall, done=done, results_input_tokens=total.input_tokens - first_input,
                        first_input_tokens=first_input, results_chars=sum(len(r) for r in results))


async def compare(children: int, bound: int, cell: float, runs: int = 1) -> dict[str, Any]:
    """Both ways, alternated `runs` times after a warm-up; the medians, and their ratios (code / calls)."""
    await code_tasks_run(2, 2, 0.1, from_code=True)  # this process's one-time costs are no row's
    by_way: dict[str, list[CodeTasksRun]] = {"code": [], "calls": []}
    for _ in range(runs):
        by_way["calls"].append(await code_tasks_run(children, bound, cell, from_code=False))
        by_way["code"].append(await code_tasks_run(children, bound, cell, from_code=True))
    found: dict[str, Any] = {"children": children, "bound": bound, "cell": cell, "runs": runs}
    for way, measured in by_way.items():
        found[way] = {key: statistics.median(getattr(m, key) for m in measured) for key in asdict(measured[0])}
        found[way]["walls"] = [m.wall for m in measured]
    found["wall_ratio"] = found["code"]["wall"] / found["calls"]["wall"]
    found["token_ratio"] = found["code"]["results_input_tokens"] / max(found["calls"]["results_input_tokens"], 1)
    return found


def describe(found: dict[str, Any]) -> str:
    code, calls = found["code"], found["calls"]
    return (
        f"{found['children']} children x {found['cell']:g} s cell, max_subagents={found['bound']}:\n"
        f"  from one cell (map_tasks): {code['wall']:.2f} s, {code['done']:.0f} done, the parent's results request "
        f"{code['results_input_tokens']:.0f} input tokens ({code['results_chars']:.0f} characters of results)\n"
        f"  {found['children']} task calls:          {calls['wall']:.2f} s, {calls['done']:.0f} done, the parent's "
        f"results request {calls['results_input_tokens']:.0f} input tokens ({calls['results_chars']:.0f} characters "
        f"of results)\n"
        f"  code / calls: wall {found['wall_ratio']:.3f}, tokens {found['token_ratio']:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.code_tasks_bench", description=__doc__)
    parser.add_argument("--children", type=int, default=50)
    parser.add_argument("--bound", type=int, default=10)
    parser.add_argument("--cell", type=float, default=0.5)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    print(describe(asyncio.run(compare(args.children, args.bound, args.cell, args.runs))))


if __name__ == "__main__":
    main()
