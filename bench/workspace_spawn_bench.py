"""Where an isolated child's extra start time goes: a pooled kernel, a forked one, a forked one with a view, a copy.

    python bench/workspace_spawn_bench.py [--files 10000] [--runs 6] [--no-copy] [--cells 50]

Kernel level, alternated in one run, on a folder of `--files` files, under the `workspace` sandbox profile, the
zygote warm. Each row is the time until the kernel answered `1`, and the host's CPU for it (medians; "paired" is
the median of each run's difference to the pooled kernel taken in the same run; the rows run in one order, then in
the reverse; "kernel CPU" is what the kernel process ran on a CPU for the row, its boot included where it was booted
for the row, not ahead):
- pooled: taking a kernel booted ahead (`KernelPool.acquire`; what a plain child does);
- forked: a kernel forked from the zygote with the main agent's plan (no view);
- forked + view: the same with the copy-on-write view mounted (what an isolated child did before its kernels
  were pooled): the difference to `forked` is the view itself (its folders and the mount), the difference of
  `forked` to `pooled` is the fork and boot that a pooled kernel did ahead of time;
- pooled + view: what an isolated child does now: its workspace made (as `open_workspace` does), then a kernel
  booted ahead in a view of its own taken from `Supplies.view_pools` and the view handed to the workspace;
- copy: a private copy of the folder (`isolation_copy`), made, then a kernel forked in it (the fallback;
  `--no-copy` leaves it out: it takes tens of seconds a run on a busy machine).

`--cells N` also times N trivial cells (`x = 1`) in each kernel once it has answered, and prints each row's cell
round trip against the pooled plain kernel's (what a cell costs in an isolated child's view, ratio in the same run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from freeact_sub import AgentConfig
from freeact_sub.kernels.backends import KernelBackend, new_kernel
from freeact_sub.kernels.cells import Cell
from freeact_sub.sandbox import BUILT_IN_PROFILES, kernel_folders
from freeact_sub.tree.copy_kernels import start_in_copy
from freeact_sub.tree.supplies import Supplies
from freeact_sub.workspaces import Workspace


def _on_cpu(pid: int) -> float:
    """Seconds process `pid` (all its threads) has run on a CPU (`/proc/<pid>/task/*/schedstat`)."""
    total = 0
    for thread in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{thread}/schedstat") as stat:
            total += int(stat.read().split()[0])
    return total / 1e9


async def main(files: int, runs: int, with_copy: bool, cells: int = 0) -> None:
    with tempfile.TemporaryDirectory() as place:
        folder = Path(place)
        for n in range(files):
            sub = folder / f"d{n // 100}"
            sub.mkdir(parents=True, exist_ok=True)
            (sub / f"f{n}.txt").write_text(f"{n}\n")
        config = AgentConfig(model="test", working_dir=folder, kernel_pool_size=1, save_sessions=False)
        profile = BUILT_IN_PROFILES["workspace"]
        supplies = Supplies(lambda: config, "bench")
        supplies.sandbox = profile
        supplies.start()
        supplies.warm_up()
        assert supplies._warming is not None
        await supplies._warming  # the zygote and the pool, warm before the first row
        plan = supplies.sandbox_plan(profile)
        assert plan is not None
        supplies.expect_views(profile, 1)
        views = supplies.view_pools[profile]
        await asyncio.sleep(3.0)  # its first view boots (each row then waits 1.5 s for the pools to top up)

        async def pooled() -> KernelBackend:
            return await supplies.pool.acquire()

        async def forked() -> KernelBackend:
            kernel = new_kernel(config, label="forked", launcher=supplies.zygote, sandbox=plan)
            await kernel.start()
            return kernel

        made: list[Workspace] = []

        async def with_view() -> KernelBackend:
            workspace = Workspace.create(kernel_folders.create("ws-"), folder)
            made.append(workspace)
            kernel = new_kernel(
                config,
                label="view",
                launcher=supplies.zygote,
                sandbox=lambda **options: {**plan(**options), "overlay": workspace.plan()},
            )
            await kernel.start()
            return kernel

        async def pooled_view() -> KernelBackend:
            workspace = Workspace.create(kernel_folders.create("ws-"), folder)
            made.append(workspace)
            return await supplies.acquire_kernel("view", profile, is_child=True, workspace=workspace)

        async def copy() -> KernelBackend:
            workspace = await asyncio.to_thread(Workspace.create_copy, folder, 1 << 30)
            made.append(workspace)
            return await start_in_copy(config, "copy", profile, workspace, launcher=supplies.zygote)

        kinds: dict[str, Callable[[], Awaitable[KernelBackend]]] = {
            "pooled": pooled,
            "forked": forked,
            "forked + view": with_view,
            "pooled + view": pooled_view,
            **({"copy": copy} if with_copy else {}),
        }
        med = statistics.median
        wall: dict[str, list[float]] = {kind: [] for kind in kinds}
        cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
        kernel_cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
        per_cell: dict[str, list[float]] = {kind: [] for kind in kinds}
        try:
            for run in range(runs):
                order = list(kinds.items())
                for kind, make in order if run % 2 == 0 else order[::-1]:  # no row always after the same one
                    await asyncio.sleep(1.5)  # the pool tops up, the machine settles
                    began, began_cpu = time.perf_counter(), time.process_time()
                    kernel = await make()
                    assert kernel.pid is not None
                    ahead = _on_cpu(kernel.pid) if kind.startswith("pooled") else 0.0  # its boot was not this row's
                    await kernel.run_cell(Cell(code="1"))
                    wall[kind].append(time.perf_counter() - began)
                    cpu[kind].append(time.process_time() - began_cpu)
                    kernel_cpu[kind].append(_on_cpu(kernel.pid) - ahead)
                    if cells:  # the same kernel's round trips of a trivial cell, once it has started
                        trips = []
                        for _ in range(cells):
                            sent = time.perf_counter()
                            await kernel.run_cell(Cell(code="x = 1"))
                            trips.append(time.perf_counter() - sent)
                        per_cell[kind].append(med(trips))
                    await kernel.shutdown(now=True)
                    for workspace in made:
                        workspace.remove()
                    made.clear()
                    if kind == "pooled":
                        supplies.pool.fill()
                    if kind == "pooled + view":
                        views.fill()
        finally:
            await supplies.close()
        base = med(wall["pooled"])
        for kind in kinds:
            took = med(wall[kind])
            paired = med([mine - plain for mine, plain in zip(wall[kind], wall["pooled"], strict=True)])
            print(
                f"{kind:14} until `1` answered {took * 1e3:7.1f} ms ({(took - base) * 1e3:+7.1f} ms against pooled;"
                f" paired {paired * 1e3:+7.1f} ms)   host CPU {med(cpu[kind]) * 1e3:6.1f} ms"
                f"   kernel CPU {med(kernel_cpu[kind]) * 1e3:6.1f} ms   ({runs} runs, {files} files)"
            )
        if cells:
            plain = med(per_cell["pooled"])
            for kind in kinds:
                trip = med(per_cell[kind])
                print(f"{kind:14} a cell's round trip (x = 1, median of {cells} a run) {trip * 1e3:6.2f} ms"
                      f" = {trip / plain:.2f} x the pooled plain kernel's")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--no-copy", action="store_true", help="leave the private copy's row out")
    parser.add_argument("--cells", type=int, default=0, help="also time this many trivial cells in each kernel")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.files, arguments.runs, not arguments.no_copy, arguments.cells))
