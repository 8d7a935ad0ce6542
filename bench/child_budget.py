"""What one child costs in CPU, phase by phase, for the host and for its kernel: the per-child budget.

    python bench/child_budget.py [--children 30] [--bound 10] [--runs 2]

A fan-out of `--children` children under `--bound`, each running one trivial cell (`cell_children`, pools
warm), with the host under cProfile on its thread's CPU clock; each phase is the CPU of the functions that do
it (their inclusive time), divided by the children. The kernel's part is the CPU of every process under the
host (forked kernels, the zygote) over the run, per child. Against the floor measured in the same run: a
kernel forked from the zygote, started, given the same cell and shut down through jupyter-client with no
agent at all (host and kernel CPU per kernel).

    python bench/child_budget.py --baseline DIR [--runs 3]

also measures the code checked out in DIR (`git archive main freeact_sub tools | tar -x -C DIR`: its `freeact_sub`
only, so both are measured by this file), one run of each in turns, each in a process of its own, and prints
the table with a column for each.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
if "--root" in sys.argv:  # the `freeact_sub` measured: the one in this folder (a baseline's), else this checkout's
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--root") + 1]).resolve()))

from bench.fan_out_runs import cpu_seconds, fan_out_run
from freeact_sub.kernels.launcher import KernelZygote
from freeact_sub.kernels.local import Kernel

__all__ = ["PHASES", "budget", "floor"]

PHASES: dict[str, tuple[tuple[str, str], ...]] = {
    "spawn: the child built and registered": (("tree/registry.py", "new_child"),),
    "start: Agent.start (MCP, tools, parts)": (("agent/agent.py", "start"),),
    "kernel hand-out (from the pool)": (("tree/registry.py", "acquire_kernel"),),
    "kernel boots for the pool (the host's side)": (("kernels/pool.py", "_boot"),),
    "  of it: sandbox set-up (plan, proxy, cgroups)": (
        ("tree/supplies.py", "_plan_now"),
        ("sandbox/guard.py", "__init__"),
    ),
    "system prompt": (("agent/parts.py", "system_prompt"),),
    "model requests": (("models/request.py", "send"),),
    "cells": (("kernels/cells.py", "execute"),),
    "finish: kernel shut down, MCP closed": (("kernels/local.py", "shutdown"), ("mcp/servers.py", "close")),
    "  of it: sandbox close (proxy, cgroups)": (("sandbox/guard.py", "close"),),
    "session writes": (("agent/conversation.py", "save"), ("agent/conversation.py", "close")),
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
    per_child = {
        name: 1000 * host * _phase_cpu(stats, markers) / profiled / children for name, markers in PHASES.items()
    }
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


async def measure(children: int, bound: int, runs: int) -> dict[str, float]:
    """Medians over `runs` of every phase and total (CPU ms per child), the floors, and the runs' walls."""
    await fan_out_run(3, 3, 0.0)  # this process's one-time costs (imports, schemas) are no child's
    budgets = [await budget(children, bound) for _ in range(runs)]
    floors = [await floor(min(children, 20)) for _ in range(runs)]
    result = {name: statistics.median(b[name] for b in budgets) for name in budgets[0]}
    result["floor host"] = statistics.median(f["host"] for f in floors)
    result["floor kernel side"] = statistics.median(f["kernel side"] for f in floors)
    return result


def table(columns: dict[str, list[dict[str, float]]]) -> str:
    """The per-child table, a column per measured code (each the median of its runs)."""
    medians = {
        label: {key: statistics.median(run[key] for run in runs) for key in runs[0]} for label, runs in columns.items()
    }
    lines = ["  " + " " * 48 + "".join(f"{label:>12}" for label in medians)]

    def row(name: str, values: list[float], suffix: str = "") -> None:
        lines.append(f"  {name:<48}" + "".join(f"{value:12.1f}" for value in values) + suffix)

    for name in PHASES:
        row(name, [m[name] for m in medians.values()])
    named = [sum(m[name] for name in PHASES if not name.startswith(" ")) for m in medians.values()]
    row(
        "the rest: events, the turn loop, approvals",
        [m["host in all (main thread)"] - n for m, n in zip(medians.values(), named, strict=True)],
    )
    for name, floor_key in (
        ("host in all (main thread)", "floor host"),
        ("kernel side in all (kernels, zygote)", "floor kernel side"),
    ):
        row(
            name,
            [m[name] for m in medians.values()],
            "   floor " + ", ".join(f"{m[floor_key]:.1f} ({m[name] / m[floor_key]:.2f}x)" for m in medians.values()),
        )
    totals = [m["host in all (main thread)"] + m["kernel side in all (kernels, zygote)"] for m in medians.values()]
    floors = [m["floor host"] + m["floor kernel side"] for m in medians.values()]
    row(
        "a child in all",
        totals,
        "   floor " + ", ".join(f"{f:.1f} ({t / f:.2f}x)" for t, f in zip(totals, floors, strict=True)),
    )
    for label, runs in columns.items():
        lines.append(f"  wall per run ({label}): " + ", ".join(f"{run['wall']:.2f} s" for run in runs))
    return "\n".join(lines)


def _one_run(children: int, bound: int, root: str | None) -> dict[str, float]:
    """One run in a process of its own, of this checkout's code or (`root`) a baseline's."""
    command = [sys.executable, __file__, "--json", "--runs", "1", "--children", str(children), "--bound", str(bound)]
    if root is not None:
        command += ["--root", root]
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=os.environ.copy())
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(children: int, bound: int, runs: int, baseline: str | None, as_json: bool) -> None:
    heading = (
        f"per child, CPU ms (median of {runs} runs of {children} children under a bound of {bound}, trivial cells)"
    )
    if baseline is None:
        result = asyncio.run(measure(children, bound, runs))
        print(json.dumps(result) if as_json else f"{heading}\n{table({'this code': [result]})}")
        return
    columns: dict[str, list[dict[str, float]]] = {"baseline": [], "this code": []}
    for run in range(runs):  # one of each in turns, the first of each pair alternating
        for label in ("baseline", "this code") if run % 2 == 0 else ("this code", "baseline"):
            columns[label].append(_one_run(children, bound, baseline if label == "baseline" else None))
    print(f"{heading}; --baseline {baseline}, alternated run by run\n{table(columns)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--children", type=int, default=30)
    parser.add_argument("--bound", type=int, default=10)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--baseline", metavar="DIR", help="also measure the freeact_sub in DIR, alternated")
    parser.add_argument("--root", metavar="DIR", help=argparse.SUPPRESS)  # read above, before the imports
    parser.add_argument("--json", action="store_true", help="print the medians as one line of JSON")
    arguments = parser.parse_args()
    main(arguments.children, arguments.bound, arguments.runs, arguments.baseline, arguments.json)
