"""What the sandbox costs: kernel spawn and a cell's round trip, confined vs. not, in one run.

    python bench/sandbox_bench.py [--spawns 20] [--rounds 200]

Both kernels of each pair are started the same way (forked by one kernel zygote, or launched as
a new process) and measured alternately, so both see the same machine load:
- spawn: `Kernel.start()` until the kernel answers, with the `workspace` profile / without;
- round trip of a trivial cell (`x = 1`) in a `workspace` kernel / in an unconfined one.
Targets: spawn +5 ms or less, round trip ratio <= 1.05.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from freeact_sub.kernels.launcher import KernelZygote
from freeact_sub.kernels.local import Kernel
from freeact_sub.sandbox import BUILT_IN_PROFILES, platform_problem


async def _spawn(folder: str, plan: dict[str, Any] | None, zygote: KernelZygote | None) -> float:
    kernel = Kernel(working_dir=folder, launcher=zygote, sandbox=plan)
    began = time.perf_counter()
    await kernel.start()
    elapsed = time.perf_counter() - began
    await kernel.shutdown(now=True)
    return elapsed


async def spawns(folder: str, plan: dict[str, Any], zygote: KernelZygote | None, count: int) -> tuple[float, float]:
    """Median spawn time without / with the sandbox."""
    samples: dict[bool, list[float]] = {False: [], True: []}
    await _spawn(folder, None, zygote)  # warm up
    for _ in range(count):
        for confined in (False, True):
            samples[confined].append(await _spawn(folder, plan if confined else None, zygote))
    return statistics.median(samples[False]), statistics.median(samples[True])


async def round_trips(folder: str, plan: dict[str, Any], rounds: int) -> tuple[float, float]:
    """Median round trip of `x = 1` without / with the sandbox."""
    free, confined = Kernel(working_dir=folder), Kernel(working_dir=folder, sandbox=plan)
    await asyncio.gather(free.start(), confined.start())
    try:
        for _ in range(10):
            await free.execute("x = 1")
            await confined.execute("x = 1")
        samples: dict[str, list[float]] = {"free": [], "confined": []}
        for _ in range(rounds):
            for name, kernel in (("free", free), ("confined", confined)):
                began = time.perf_counter()
                await kernel.execute("x = 1")
                samples[name].append(time.perf_counter() - began)
    finally:
        await asyncio.gather(free.shutdown(), confined.shutdown())
    return statistics.median(samples["free"]), statistics.median(samples["confined"])


async def main(count: int, rounds: int) -> None:
    if (problem := platform_problem()) is not None:
        sys.exit(f"no sandbox on this machine: {problem}")
    with tempfile.TemporaryDirectory() as folder:
        plan = BUILT_IN_PROFILES["workspace"].plan(Path(folder))
        zygote = KernelZygote()
        await zygote.start()
        try:
            forked = await spawns(folder, plan, zygote, count)
        finally:
            await zygote.close()
        launched = await spawns(folder, plan, None, max(count // 4, 3))
        trip = await round_trips(folder, plan, rounds)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    for name, (free, confined) in (("forked (zygote, as the pool and children)", forked),
                                   ("launched (new process, as the main agent)", launched)):
        print(f"spawn, {name}: {free * 1000:.1f} ms without, {confined * 1000:.1f} ms with the sandbox: "
              f"{(confined - free) * 1000:+.1f} ms (target <= +5 ms)")
    free, confined = trip
    print(f"round trip of x = 1 (median of {rounds}): {free * 1000:.2f} ms without, {confined * 1000:.2f} ms with: "
          f"ratio {confined / free:.3f} (target <= 1.05)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spawns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=200)
    options = parser.parse_args()
    asyncio.run(main(options.spawns, options.rounds))
