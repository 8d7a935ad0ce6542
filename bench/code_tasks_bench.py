"""Subagents from code against `task` tool calls (issue 33): N children, each running one cell of a fixed length,
started by one cell (`map_tasks`) or by N `task` calls in one response, in the same run.

    python -m bench.code_tasks_bench [--children 50] [--bound 10] [--cell 0.5] [--runs 1]

Measured for each: the wall time of the parent's turn, whether every child answered, and what the parent's
second model request (the one that reads the results) holds: the results' characters and tokens, and the whole
request's tokens. A streamed `FunctionModel` reports no input tokens, so tokens are estimated here as words
and punctuation marks (about what a tokenizer makes of English and code, no provider's exact count): the
numbers compare the two ways with each other, not with a provider's bill.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart
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
    results_chars: int
    """Characters of tool results in the parent's request that reads them."""
    results_tokens: int
    """Their tokens (estimated: words and punctuation marks)."""
    request_tokens: int
    """The tokens of that whole request (system prompt, prompt, first response, results; estimated alike)."""


def tokens(text: str) -> int:
    """An estimate of `text`'s tokens: its words and its punctuation marks."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def request_text(messages: list[ModelMessage]) -> str:
    """Everything a model request sends as text: every part's content, tool calls' arguments included."""
    texts: list[str] = []
    for message in messages:
        if isinstance(message, ModelRequest | ModelResponse):
            for part in message.parts:
                content = getattr(part, "content", None)
                texts.append(content if isinstance(content, str) else json.dumps(getattr(part, "args", "") or ""))
    return "\n".join(texts)


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
    seen: dict[str, Any] = {}

    async def recording(messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
        if not first_prompt(messages).startswith("child"):
            seen["results"] = [p.model_response_str() for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
            seen["request"] = request_text(messages)
        async for item in script(messages, info):
            yield item

    with tempfile.TemporaryDirectory() as work:
        config = AgentConfig(model=FunctionModel(stream_function=recording), working_dir=work, max_subagents=bound,
                             auto_approve=True, save_sessions=False)
        async with Agent(config) as agent:
            await wait_for_pool(agent)
            me = agent.agent_id
            done = 0
            began = time.perf_counter()
            async for event in agent.stream("fan out"):
                if isinstance(event, ToolOutput) and event.agent_id == me and event.tool_name == "task" \
                        and event.source == "model":  # a child from code is counted by the cell's line
                    done += event.content == "child done"
                if isinstance(event, CodeExecutionOutput) and event.agent_id == me:
                    first = (event.content.split() or [""])[0]
                    done += int(first) if first.isdigit() else 0
            wall = time.perf_counter() - began
    results = "\n".join(seen.get("results", []))
    return CodeTasksRun(wall=wall, done=done, results_chars=len(results), results_tokens=tokens(results),
                        request_tokens=tokens(seen.get("request", "")))


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
    found["token_ratio"] = found["code"]["results_tokens"] / max(found["calls"]["results_tokens"], 1)
    found["request_token_ratio"] = found["code"]["request_tokens"] / max(found["calls"]["request_tokens"], 1)
    return found


def describe(found: dict[str, Any]) -> str:
    """The comparison in a few lines."""
    lines = [f"{found['children']} children x {found['cell']:g} s cell, max_subagents={found['bound']}, "
             f"median of {found['runs']} run(s) each:"]
    for way, label in (("code", "from one cell (map_tasks)"), ("calls", f"{found['children']} task calls")):
        m = found[way]
        walls = ", ".join(f"{w:.2f}" for w in m["walls"])
        lines.append(f"  {label:<26} {m['wall']:.2f} s ({walls}), {m['done']:.0f} done; the parent reads "
                     f"{m['results_chars']:.0f} characters of results (~{m['results_tokens']:.0f} tokens) in a "
                     f"request of ~{m['request_tokens']:.0f} tokens")
    lines.append(f"  code / calls: wall {found['wall_ratio']:.3f}, results tokens {found['token_ratio']:.3f}, "
                 f"whole request {found['request_token_ratio']:.3f}")
    return "\n".join(lines)


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
