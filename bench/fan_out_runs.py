"""The fan-out rows of `subagent_bench.py --only fan-out` (issue 21): each child runs one cell of a fixed length;
the run's wall time against its floor and against the same cells on warm kernels with no agents at all."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from pydantic_ai.models.function import FunctionModel

from bench.spawning import CALC_SERVER, alive, cell_children, tree_pss, wait_for_pool
from freeact_sub import Agent, AgentConfig, SubagentFinished, ToolOutput
from freeact_sub.kernels.launcher import KernelZygote
from freeact_sub.kernels.local import Kernel

__all__ = ["FAN_OUT_ROWS", "FanOut", "baseline_cells", "fan_out_rows", "fan_out_run"]


async def baseline_cells(children: int, bound: int, cell: float) -> float:
    """Wall time of `children` cells of `cell` seconds on `bound` warm forked kernels, `bound` at a time."""
    with tempfile.TemporaryDirectory() as work:
        zygote = KernelZygote()
        await zygote.start()
        kernels = [Kernel(working_dir=work, launcher=zygote) for _ in range(bound)]
        try:
            await asyncio.gather(*(k.start() for k in kernels))
            jobs: asyncio.Queue[int] = asyncio.Queue()
            for i in range(children):
                jobs.put_nowait(i)

            async def worker(kernel: Kernel) -> None:
                while not jobs.empty():
                    jobs.get_nowait()
                    await kernel.execute(f"import time; time.sleep({cell})")

            began = time.perf_counter()
            await asyncio.gather(*(worker(k) for k in kernels))
            return time.perf_counter() - began
        finally:
            await asyncio.gather(*(k.shutdown(now=True) for k in kernels), return_exceptions=True)
            await zygote.close()


@dataclass
class FanOut:
    """What one fan-out run measured."""

    wall: float
    done: int
    """Children whose `task` result was their answer."""
    peak_child_kernels: int
    """The most kernels of children running at once (what `max_subagents` bounds)."""
    peak_pool_kernels: int
    """The most kernels the pool held at once, ready or booting (fresh ones for the children to come)."""
    peak_mib: float | None = None
    cpu: float = 0.0
    """CPU seconds used by the run: this process, and every process under it (kernels, zygote, servers)."""
    host_cpu: float = 0.0
    """The part of `cpu` this process used (the agents, the watchers of this benchmark)."""


def cpu_seconds() -> float:
    """CPU seconds of this process and of every process under it, the ones that ended (and were reaped) included."""
    import psutil

    total = 0.0
    for process in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


async def fan_out_run(children: int, bound: int, cell: float, *, background: bool = False, mcp: bool = False,
                      memory: bool = False, events: list[Any] | None = None, pool: int | None = None,
                      mcp_tools: str | None = None) -> FanOut:
    """One parent turn that starts `children` children of one `cell`-second cell each, under `bound`; with
    `events`, every event of the run (the children's too) is appended to it; `pool` sets `kernel_pool_size`,
    `mcp_tools` the agents' `mcp_tools`."""
    script = cell_children(children, cell, background=background)

    with tempfile.TemporaryDirectory() as work:
        servers = {"calc": {"command": sys.executable, "args": [str(CALC_SERVER)]}} if mcp else {}
        config = AgentConfig(model=FunctionModel(stream_function=script), working_dir=work, max_subagents=bound,
                             auto_approve=True, mcp_servers=servers)
        if pool is not None:
            config = config.model_copy(update={"kernel_pool_size": pool})
        if mcp_tools is not None:
            config = config.model_copy(update={"mcp_tools": mcp_tools})
        async with Agent(config) as agent:
            await wait_for_pool(agent)
            tree = agent.tree
            seen: set[int] = set()
            running: set[int] = set()
            peak_children = peak_pool = 0
            peak_mib: float | None = None
            watching = True

            async def watch() -> None:
                nonlocal peak_children, peak_pool
                while watching:
                    for record in list(tree.agents.values()):
                        kernel = getattr(record.agent, "kernel", None)
                        pid = kernel.pid if kernel is not None and record.parent_id is not None else None
                        if pid is not None and pid not in seen:
                            seen.add(pid)
                            running.add(pid)
                    running.difference_update([pid for pid in running if not alive(pid)])  # a pid is not reused
                    peak_children = max(peak_children, len(running))
                    peak_pool = max(peak_pool, tree.supplies.pool.ready + getattr(tree.supplies.pool, "booting", 0))
                    await asyncio.sleep(0.02)  # at 5 ms, reading /proc was ~8 % of the host's samples

            async def weigh() -> None:
                nonlocal peak_mib
                while watching:
                    peak_mib = max(peak_mib or 0.0, await asyncio.to_thread(tree_pss))
                    await asyncio.sleep(0.2)

            watchers = [asyncio.create_task(watch()), *([asyncio.create_task(weigh())] if memory else [])]
            done = 0
            cpu = cpu_seconds()
            host = time.process_time()
            began = time.perf_counter()

            def count(event: object) -> None:
                nonlocal done
                if events is not None:
                    events.append(event)
                if background:
                    done += isinstance(event, SubagentFinished) and event.status == "done"
                else:
                    answered = isinstance(event, ToolOutput) and event.tool_name == "task"
                    done += answered and event.content == "child done"

            ended = 0
            async for event in agent.stream("fan out"):
                count(event)
                ended += isinstance(event, SubagentFinished)
            if background:
                later = agent.background_events()
                while ended < children:
                    event = await anext(later)
                    count(event)
                    ended += isinstance(event, SubagentFinished)
            wall = time.perf_counter() - began
            cpu = cpu_seconds() - cpu  # the kernels that ended were reaped by the zygote: in its children's times
            host = time.process_time() - host
            watching = False
            await asyncio.gather(*watchers)
            return FanOut(wall, done, peak_children, peak_pool, peak_mib, cpu, host)


FAN_OUT_ROWS = [  # (children, bound, cell, background, mcp, memory)
    (10, 5, 1.0, False, False, False),
    (50, 10, 0.5, False, False, False),
    (50, 10, 0.5, True, False, False),
    (30, 10, 0.5, False, True, False),
    (200, 20, 0.5, False, False, True),
]


async def fan_out_rows(runs: int = 1) -> None:
    """Every row of (6): the agents' wall time, the floor, and the same cells without agents, alternated."""
    await fan_out_run(5, 5, 0.1)  # this process's one-time costs (imports, schemas) are no row's
    for children, bound, cell, background, mcp, memory in FAN_OUT_ROWS:
        floor = -(-children // bound) * cell
        walls, bases, results = [], [], []
        for _ in range(runs):
            bases.append(await baseline_cells(children, bound, cell))
            result = await fan_out_run(children, bound, cell, background=background, mcp=mcp, memory=memory)
            results.append(result)
            walls.append(result.wall)
        wall, base = statistics.median(walls), statistics.median(bases)
        what = ("background" if background else "foreground") + (", one stdio MCP server no child calls" if mcp else "")
        print(f"fan-out {children} x {cell:g} s cell, max_subagents={bound}, {what}: {wall:.2f} s "
              f"= {wall / floor:.3f} x the {floor:.1f} s floor; the same cells without agents {base:.2f} s "
              f"({base / floor:.3f} x the floor); agents / cells {wall / base:.3f}"
              + (f" (runs: {', '.join(f'{w:.2f}' for w in walls)})" if runs > 1 else ""))
        cpu = statistics.median(r.cpu for r in results)
        host = statistics.median(r.host_cpu for r in results)
        cores = os.cpu_count() or 1
        print(f"    CPU: {cpu:.1f} s ({cpu / children * 1000:.0f} ms a child, {host / children * 1000:.0f} ms of it in "
              f"this process: the agents and this benchmark's watchers; the rest kernels and zygote); on {cores} cores "
              f"no run can take less than {cpu / cores:.2f} s "
              f"(ratio to that {wall / max(floor, cpu / cores):.3f} of the larger of it and the floor)")
        lost = max(children - r.done for r in results)
        peak_mib = [r.peak_mib for r in results if r.peak_mib is not None]
        print(f"    children lost: {lost}; most child kernels running at once: "
              f"{max(r.peak_child_kernels for r in results)} (bound {bound}); most pool kernels at once (ready or "
              f"booting): {max(r.peak_pool_kernels for r in results)}"
              + (f"; peak memory (PSS of this process and all under it): {max(peak_mib):.0f} MiB" if peak_mib else ""))
