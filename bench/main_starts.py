"""Main agents started one after another in one process (a notebook, a program, a test worker): CPU per start.

Each run is a fresh Python process that starts `--agents` main agents in turn, each under its own `asyncio.run`,
and has each run one cell; its CPU (every process under it included: the kernels, the zygote and the kernels it
forked, all reaped) and wall time are read from `getrusage(RUSAGE_CHILDREN)`. With `--base FOLDER` (another
checkout of the code, e.g. `git archive main | tar -x -C FOLDER`), runs of that code and of this one alternate,
so both meet the same load:

    python -m bench.main_starts --agents 6 --rounds 3 --base /tmp/base
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["measure"]

HERE = Path(__file__).resolve().parent.parent

PROGRAM = """
import asyncio, sys
from freeact_sub import Agent, AgentConfig
from pydantic_ai.models.function import DeltaToolCall, FunctionModel

async def reply(messages, info):
    if len(messages) == 1:
        yield {0: DeltaToolCall(name="execute_ipython_cell", json_args='{"code": "print(1 + 1)"}', tool_call_id="c")}
    else:
        yield "done"

async def one(folder):
    model = FunctionModel(stream_function=reply)
    config = AgentConfig(model=model, working_dir=folder, auto_approve=True, save_sessions=False)
    async with Agent(config) as agent:
        async for _ in agent.stream("go"):
            pass

for _ in range(int(sys.argv[2])):
    asyncio.run(one(sys.argv[1]))
"""


def measure(tree: Path, agents: int) -> tuple[float, float]:
    """CPU seconds (all processes) and wall seconds of one process starting `agents` main agents with `tree`'s code."""
    with tempfile.TemporaryDirectory() as work:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", PROGRAM, work, str(agents)],
            check=True,
            cwd=work,
            env={**os.environ, "PYTHONPATH": str(tree)},
            stdout=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", type=Path, help="another checkout to compare with (alternated, same run)")
    args = parser.parse_args()
    trees = {"this": HERE, **({"base": args.base.resolve()} if args.base else {})}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            results[name].append(measure(tree, args.agents))
    for name, runs in results.items():
        cpu = statistics.median(c for c, _ in runs)
        wall = statistics.median(w for _, w in runs)
        print(
            f"{name}: {args.agents} main agents, one after another: CPU {cpu:.2f} s ({cpu / args.agents:.2f} s a "
            f"start), wall {wall:.2f} s (runs: {', '.join(f'{c:.2f}' for c, _ in runs)} s of CPU)"
        )
    if "base" in results:
        ratio = statistics.median(results["this"][i][0] / results["base"][i][0] for i in range(args.rounds))
        print(f"this / base, CPU, median of paired rounds: {ratio:.2f}")


if __name__ == "__main__":
    main()
