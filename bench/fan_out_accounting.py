"""Where a fan-out's time goes beyond its floor, read from the run's own events (its timeline).

    python bench/fan_out_accounting.py [--runs 3] [--rows 10,50,30mcp,200]

Each row of `subagent_bench.py --only fan-out` runs once per `--runs` (with the same cells on warm
kernels without agents before it, as there); its events give each child's time in its slot:
start (slot taken -> its first model request), the first model request (thinking), the first
cell's wait for the child's kernel (which boots beside that request), the cell beyond its own
length and that wait (the cell's overhead), the second model request, finishing (final answer
-> its kernel is gone and `SubagentFinished` is out), and the time the next child waits after a
slot is freed (hand-off). The wall time splits into the head (turn start -> first child
started: the parent's model request, its `task` calls' approvals), the waves (the slowest
chain of children that followed one another on one slot) and the tail (last child finished ->
the parent's final answer). Medians over runs are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fan_out_runs import baseline_cells, fan_out_run
from freeact_sub import (
    ApprovalRequest,
    CodeExecutionOutput,
    Response,
    SubagentFinished,
    SubagentStarted,
    TurnStarted,
)

ROWS = {  # name: (children, bound, cell, mcp, kernel_pool_size: None for the default; + mcp_tools)
    "10": (10, 5, 1.0, False, None),
    "50": (50, 10, 0.5, False, None),
    "30": (30, 10, 0.5, False, None),
    "30mcp": (30, 10, 0.5, True, None),
    "200": (200, 20, 0.5, False, None),
    "10pool": (10, 5, 1.0, False, 5),  # the pool holds the first wave's kernels: no fork on the way
    "50pool": (50, 10, 0.5, False, 10),
    "30mcppool": (30, 10, 0.5, True, 10),
    "200pool": (200, 20, 0.5, False, 20),
}
MCP_TOOLS = {"30mcpcalls": "calls"}
"""Rows with another `mcp_tools` than the default ("both"): MCP tools as calls only, no code tools in kernels."""
ROWS["30mcpcalls"] = ROWS["30mcp"]


@dataclass
class Child:
    """The moments of one child's life, from its events (seconds, wall clock)."""

    started: float = 0.0
    requests: list[float] = field(default_factory=list)
    """When each of its model requests began (`TurnStarted` for the first, the cell's output for the next)."""
    cell_asked: float = 0.0
    cell_ended: float = 0.0
    kernel_wait: float = 0.0
    """Seconds its cell waited for its kernel (it boots beside the child's first model request)."""
    answered: float = 0.0
    finished: float = 0.0


def children_of(events: list[Any]) -> dict[str, Child]:
    root = events[0].agent_id
    kids: dict[str, Child] = defaultdict(Child)
    for event in events:
        match event:
            case SubagentStarted():
                kids[event.subagent_id].started = event.at
            case SubagentFinished():
                kids[event.subagent_id].finished = event.at
            case TurnStarted() if event.agent_id != root:
                kids[event.agent_id].requests.append(event.at)
            case ApprovalRequest() if event.agent_id != root:
                kids[event.agent_id].cell_asked = event.at
            case CodeExecutionOutput() if event.agent_id != root:
                kids[event.agent_id].cell_ended = event.at
                kids[event.agent_id].kernel_wait = event.kernel_wait
            case Response() if event.agent_id != root and event.final:
                kids[event.agent_id].answered = event.at
    return dict(kids)


def account(events: list[Any], bound: int, cell: float) -> dict[str, float]:
    """Seconds per part, means per child and the wall time's split (see the module's docstring)."""
    root = events[0].agent_id
    began = events[0].at
    ended = max(e.at for e in events if isinstance(e, Response) and e.agent_id == root and e.final)
    kids = [k for k in children_of(events).values() if k.finished]
    parts: dict[str, list[float]] = defaultdict(list)
    for k in kids:
        first = k.requests[0] if k.requests else k.cell_asked
        parts["start"].append(first - k.started)
        parts["model 1"].append(k.cell_asked - first)
        parts["kernel wait"].append(k.kernel_wait)
        parts["cell beyond its length"].append(k.cell_ended - k.cell_asked - cell - k.kernel_wait)
        parts["model 2"].append(k.answered - k.cell_ended)
        parts["finishing"].append(k.finished - k.answered)
        parts["in slot beyond the cell"].append(k.finished - k.started - cell)
    starts = sorted(k.started for k in kids)
    finishes = sorted(k.finished for k in kids)
    handoffs = [starts[bound + j] - finishes[j] for j in range(len(starts) - bound)]
    result = {name: statistics.mean(values) for name, values in parts.items()}
    result["hand-off"] = statistics.mean(handoffs) if handoffs else 0.0
    result["first wave: start"] = statistics.mean(sorted(k.requests[0] - k.started for k in kids
                                                         if k.requests and k.started <= starts[bound - 1]))
    later = [k for k in kids if k.started > starts[bound - 1]]
    result["later waves: in slot beyond the cell"] = (
        statistics.mean(k.finished - k.started - cell for k in later) if later else 0.0
    )
    result["later waves: start"] = statistics.mean(k.requests[0] - k.started for k in later) if later else 0.0
    # the chain of children that followed one another on the slot the last one to finish ended on
    by_start = sorted(kids, key=lambda k: k.started)
    by_finish = sorted(kids, key=lambda k: k.finished)
    chain = [by_finish[-1]]
    while (i := by_start.index(chain[-1])) >= bound:
        chain.append(by_finish[i - bound])
    chain.reverse()
    result["chain: children"] = len(chain)
    result["chain: head"] = chain[0].started - began
    result["chain: first child's start"] = (chain[0].requests or [chain[0].cell_asked])[0] - chain[0].started
    for name, part in (("start", lambda k: (k.requests or [k.cell_asked])[0] - k.started),
                       ("model", lambda k: k.cell_asked - k.requests[0] + k.answered - k.cell_ended),
                       ("kernel wait", lambda k: k.kernel_wait),
                       ("cell beyond its length", lambda k: k.cell_ended - k.cell_asked - cell - k.kernel_wait),
                       ("finishing", lambda k: k.finished - k.answered)):
        result[f"chain: {name}"] = sum(part(k) for k in chain)
    result["chain: hand-offs"] = sum(b.started - a.finished for a, b in itertools.pairwise(chain))
    result["head"] = starts[0] - began
    result["tail"] = ended - finishes[-1]
    result["wall"] = ended - began
    return result


async def main(runs: int, rows: list[str]) -> None:
    await fan_out_run(5, 5, 0.1)  # this process's one-time costs
    for name in rows:
        children, bound, cell, mcp, pool = ROWS[name]
        waves = -(-children // bound)
        floor = waves * cell
        accounts, bases = [], []
        for _ in range(runs):
            bases.append(await baseline_cells(children, bound, cell))
            events: list[Any] = []
            run = await fan_out_run(children, bound, cell, mcp=mcp, events=events, pool=pool,
                                    mcp_tools=MCP_TOOLS.get(name))
            accounts.append(account(events, bound, cell) | {"cpu": run.cpu / children, "host": run.host_cpu / children})
        median = {key: statistics.median(a[key] for a in accounts) for key in accounts[0]}
        base = statistics.median(bases)
        server = (", one MCP server" if mcp else "") + (f", kernel_pool_size={pool}" if pool is not None else "")
        server += f", mcp_tools={MCP_TOOLS[name]!r}" if name in MCP_TOOLS else ""
        print(f"{children} x {cell:g} s, bound {bound}{server}: wall {median['wall']:.3f} s, "
              f"floor {floor:.1f} s, bare cells {base:.3f} s; gap to the floor {median['wall'] - floor:.3f} s "
              f"({waves} waves)")
        print(f"    head {median['head'] * 1000:.0f} ms, tail {median['tail'] * 1000:.0f} ms, "
              f"hand-off {median['hand-off'] * 1000:.1f} ms a slot; CPU a child {median['cpu'] * 1000:.0f} ms "
            f"({median['host'] * 1000:.0f} ms of it in this process)")
        print("    the chain that ended last (ms, summed over its children): " + ", ".join(
            f"{key.removeprefix('chain: ')} {median[key] * (1 if key == 'chain: children' else 1000):.0f}"
            for key in median if key.startswith("chain: ")))
        print("    per child in its slot (ms): " + ", ".join(
            f"{key} {median[key] * 1000:.1f}" for key in ("start", "model 1", "kernel wait", "cell beyond its length",
                                                         "model 2",
                                                         "finishing", "in slot beyond the cell", "first wave: start",
                                                         "later waves: start", "later waves: in slot beyond the cell")))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", default="10,50,30,30mcp,200")
    options = parser.parse_args()
    asyncio.run(main(options.runs, options.rows.split(",")))
