"""What one child costs in CPU, phase by phase, for the host and for its kernel: the per-child budget.

    python bench/child_budget.py [--children 30] [--bound 10] [--runs 2]

A fan-out of `--children` children under `--bound`, each running one trivial cell (`cell_children`, pools
warm), with the host under cProfile on its thread's CPU clock; each phase is the CPU of the functions that do
it (their inclusive time), divided by the children. The kernel's part is the CPU of every process under the
host (forked kernels, the zygote) over the run, per child. Against the floor measured in the same run: a
kernel forked from the zygote, started, given the same cell and shut down through jupyter-client with no
agent at all (host and kernel CPU per kernel).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fan_out_runs import cpu_seconds, fan_out_run
from freeact_sub.kernels.launcher import KernelZygote
from freeact_sub.kernels.local import Kernel

__all__ = ["PHASES", "budget", "floor"]

PHASES: dict[str, tuple[tuple[str, str], ...]] = {
    "agent start (kernel, MCP, parts)": (("agent/parts.py", "start_parts"),),
    "  of it: a kernel from the pool": (("tree/supplies.py", "acquire_kernel"),),
    "  of it: sandbox plan": (("tree/supplies.py", "_plan_now"),),
    "system prompt": (("agent/parts.py", "system_prompt"),),
    "model requests": (("models/request.py", "send"),),
    "cells": (("kernels/cells.py", "execute"),),
    "finish (kernel, MCP closed)": (("agent/parts.py", "close"),),
    "session writes": (("sessions/store.py", "record"), ("sessions/transcript.py", "close")),
}
"""Each phase and the functions (file under freeact_sub/, name) whose inclusive CPU it is; indented ones are
parts of the phase above, not added to the total."""


def _phase_cpu(stats: pstats.Stats, markers: tuple[tuple[str, str], ...]) -> float:
    total = 0.0
    for (file, _line, name), (_cc, _nc, _tt, cumulative, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if any(file.endswith("freeact_sub/" + where) and name == function for where, function in markers):
            total += cumulative
    return total


async def budget(children: int, bound: int) -> dict[str, float]:
    """CPU milliseconds per child: the host in all and the kernel side in all (a run without the profiler), and
    each phase of the host: its share of a profiled run's host CPU, times the host's CPU of the plain run."""
    host = time.thread_time()
    others = cpu_seconds() - time.process_time()
    result = await fan_out_run(children, bound, 0.0)
    host = time.thread_time() - host
    others = cpu_seconds() - time.process_time() - others
    assert result.done == children, f"{result.done} of {children} children answered"

    profile = cProfile.Profile(time.thread_time)
    profiled = time.thread_time()
    profile.enable()
    await fan_out_run(children, bound, 0.0)
    profile.disable()
    profiled = time.thread_time() - profiled
    stats = pstats.Stats(profile)
    per_child = {name: 1000 * host * _phase_cpu(stats, markers) / profiled / children
                 for name, markers in PHASES.items()}
    per_child["host in all (main thread)"] = 1000 * host / children
    per_child["kernel side in all (kernels, zygote)"] = 1000 * others / children
    per_child["wall"] = result.wall
    return per_child


async def floor(kernels: int) -> dict[str, float]:
    """CPU milliseconds per kernel of a forked kernel's start, one trivial cell and shutdown, with no agent."""
    with tempfile.TemporaryDirectory() as work:
        zygote = KernelZygote()
        await zygote.start()
        try:
            host, others = time.process_time(), cpu_seconds() - time.process_time()
            for _ in range(kernels):
                kernel = Kernel(working_dir=work, launcher=zygote)
                await kernel.start()
                await kernel.execute("import time; time.sleep(0.0)")
                await kernel.shutdown(now=True)
            host = time.process_time() - host
            others = cpu_seconds() - time.process_time() - others
        finally:
            await zygote.close()
    return {"host": 1000 * host / kernels, "kernel side": 1000 * others / kernels}


async def main(children: int, bound: int, runs: int) -> None:
    await fan_out_run(3, 3, 0.0)  # this process's one-time costs (imports, schemas) are no child's
    budgets = [await budget(children, bound) for _ in range(runs)]
    floors = [await floor(min(children, 20)) for _ in range(runs)]
    print(f"per child, CPU ms (median of {runs} runs of {children} children under a bound of {bound}, trivial cells)")
    for name in PHASES:
        print(f"  {name:<42} {statistics.median(b[name] for b in budgets):8.1f}")
    host = statistics.median(b["host in all (main thread)"] for b in budgets)
    named = sum(statistics.median(b[name] for b in budgets) for name in PHASES if not name.startswith(" "))
    print(f"  {'the rest: events, the turn loop, approvals':<42} {host - named:8.1f}")
    kernel = statistics.median(b["kernel side in all (kernels, zygote)"] for b in budgets)
    floor_host = statistics.median(f["host"] for f in floors)
    floor_kernel = statistics.median(f["kernel side"] for f in floors)
    print(f"  {'host in all (main thread)':<42} {host:8.1f}   floor {floor_host:6.1f}  ({host / floor_host:.2f}×)")
    print(f"  {'kernel side in all (kernels, zygote)':<42} {kernel:8.1f}   floor {floor_kernel:6.1f}"
          f"  ({kernel / floor_kernel:.2f}×)")
    total, floor_total = host + kernel, floor_host + floor_kernel
    print(f"  {'a child in all':<42} {total:8.1f}   floor {floor_total:6.1f}  ({total / floor_total:.2f}×)")
    walls = ", ".join(f"{b['wall']:.2f} s" for b in budgets)
    print(f"  wall per run: {walls}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--children", type=int, default=30)
    parser.add_argument("--bound", type=int, default=10)
    parser.add_argument("--runs", type=int, default=2)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.children, arguments.bound, arguments.runs))
