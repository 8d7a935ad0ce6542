"""What the demo tour costs, measured in one run on this machine.

    python bench/demo_tour_bench.py [--runs 3]

The tour (`freeact-sub --demo`, "show me what you can do") runs in-process against the scripted
server with `chunk_delay=0`, every action approved, default pools (as `--demo` runs), in two shapes that
alternate run by run:

- baseline: the tour as it was before the reviewer and the MCP-from-code cell (an image cell,
  then two `general` subagents): `mcp_tools="calls"` and no agent types;
- tour: as shipped, with the cell that calls MCP tools from code and the third subagent, the
  `reviewer` type on the Anthropic protocol (MCP-only, no kernel).

It prints the median wall time of each (agent start to final answer, and the turn alone) and the
ratio tour / baseline. No target: the number says what a newcomer and CI pay for the extra steps.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from freeact_sub import Agent, ApprovalRequest, Response, SubagentStarted
from freeact_sub.demo import demo_config, start_demo_server


async def tour(shape: str) -> tuple[float, float, int]:
    """One tour; returns (seconds from start to the answer, seconds of the turn alone, subagents)."""
    with tempfile.TemporaryDirectory() as folder, start_demo_server(chunk_delay=0) as server:
        config = demo_config(server, working_dir=Path(folder), save_sessions=False)
        if shape == "baseline":
            config = config.model_copy(update={"agents": {}, "mcp_tools": "calls"})
        started = time.perf_counter()
        children = 0
        async with Agent(config) as agent:
            turn = time.perf_counter()
            async for event in agent.stream("Show me what you can do"):
                if isinstance(event, ApprovalRequest) and not event.decided:
                    event.approve(True)
                elif isinstance(event, SubagentStarted):
                    children += 1
                elif isinstance(event, Response) and event.final and event.agent_id == agent.agent_id:
                    done = time.perf_counter()
        return done - started, done - turn, children


async def main(runs: int) -> None:
    times: dict[str, list[tuple[float, float]]] = {"baseline": [], "tour": []}
    for run in range(runs):
        for shape in ("baseline", "tour") if run % 2 == 0 else ("tour", "baseline"):
            total, turn, children = await tour(shape)
            times[shape].append((total, turn))
            print(f"run {run + 1} {shape:8} {children} subagents  total {total:5.2f} s  turn {turn:5.2f} s")
    medians = {shape: [statistics.median(t[i] for t in values) for i in (0, 1)] for shape, values in times.items()}
    for shape, (total, turn) in medians.items():
        print(f"median {shape:8}  total {total:5.2f} s  turn {turn:5.2f} s")
    base, new = medians["baseline"], medians["tour"]
    print(f"tour / baseline: total {new[0] / base[0]:.2f}, turn {new[1] / base[1]:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    asyncio.run(main(parser.parse_args().runs))
