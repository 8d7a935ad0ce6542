"""Subagent spawn latency and fan-out, measured in one run on this machine.

    python bench/subagent_bench.py [--spawns 7]

(1) Spawn latency: from the moment the parent's `task` call is approved to the child's first
    model request, with the kernel pool (warm), without it, and with an MCP server configured
    (MCP connection pool warm, and off); baselines measured in the same run: a plain kernel
    start and a plain MCP connect.
    Targets: <= 100 ms median with the pools warm, with and without an MCP server; with the MCP
    pool off, <= 1.2 x the slower of kernel start and MCP connect (they run concurrently).
(2) Fan-out: 10 children, each running a 1 s cell, `max_subagents=5`. Target: wall time <= 2.6 s.
(3) A kernel-less agent type (no `execute_ipython_cell`, so no kernel process at all), kernel pool
    off: its spawn latency against a `general` child's with the pool off (same run).
(5) `--only mcp-fan-out`: 30 children x 0.5 s cell, `max_subagents=10`, with one stdio MCP server
    configured that no child calls, and without (alternated, same run); each as a ratio to the
    1.5 s floor. Target: <= 1.3 x with the server.
(6) `--only fan-out`: the rows of issue 21, each child running one cell of a fixed length, with
    its wall time as a ratio to its floor (waves x cell) and to a baseline of the same run: the
    same cells on `bound` warm kernels, `bound` at a time, with no agents at all (what this
    machine's load makes of the cells themselves). Rows: 10 x 1 s under 5; 50 x 0.5 s under 10 in
    the foreground and in the background; 30 x 0.5 s under 10 with one stdio MCP server no child
    calls; 200 x 0.5 s under 20, with the most child kernels alive at once, children lost, and the
    peak memory (PSS) of this process and everything under it. `--runs N` repeats each row.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `bench` is beside it

from pydantic_ai.models.function import FunctionModel

from bench.fan_out_runs import fan_out_rows
from bench.spawning import CALC_SERVER, SpawnScript, cell_children, timed_spawn, wait_for_pool
from freeact_sub import Agent, AgentConfig, SubagentFinished
from freeact_sub.kernels.launcher import KernelZygote
from freeact_sub.kernels.local import Kernel
from freeact_sub.mcp.servers import McpConnections

KERNEL_SOCKET = re.compile(r"freeact-sub-\d+/kernel-[^/]+/run/")
"""Where a kernel binds its sockets (`freeact_sub.sandbox.kernel_folders`)."""



KERNEL_LESS = {"thinker": {"description": "Reasons without code.", "disallowedTools": ["execute_ipython_cell"]}}


async def spawn_latencies(
    spawns: int, pool_size: int, mcp: bool, mcp_pool_size: int = 1, agent_type: str = "general"
) -> list[float]:
    """One child per parent turn, `spawns` turns; latency = child's first request - approval of the task call."""
    samples = []
    with tempfile.TemporaryDirectory() as work:
        script = SpawnScript(children=1, agent_type=agent_type)
        servers = {"calc": {"command": sys.executable, "args": [str(CALC_SERVER)]}} if mcp else {}
        config = AgentConfig(model=FunctionModel(stream_function=script), working_dir=work, mcp_pool_size=mcp_pool_size,
                             kernel_pool_size=pool_size, mcp_servers=servers, agents=KERNEL_LESS)
        async with Agent(config) as agent:
            for _ in range(spawns):
                await wait_for_pool(agent)
                samples.append(await timed_spawn(agent, script))
    return samples


async def kernel_starts(count: int) -> list[float]:
    samples = []
    with tempfile.TemporaryDirectory() as work:
        for _ in range(count):
            began = time.perf_counter()
            kernel = Kernel(working_dir=work)
            await kernel.start()
            samples.append(time.perf_counter() - began)
            await kernel.shutdown()
    return samples


async def mcp_connects(count: int) -> list[float]:
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        connections = McpConnections({"calc": AgentConfig(mcp_servers={"calc": {
            "command": sys.executable, "args": [str(CALC_SERVER)]}}).mcp_servers["calc"]})
        await connections.open()
        samples.append(time.perf_counter() - began)
        await connections.close()
    return samples


async def fan_out() -> float:
    with tempfile.TemporaryDirectory() as work:
        script = SpawnScript(children=10, child_code="import time; time.sleep(1)")
        config = AgentConfig(model=FunctionModel(stream_function=script), working_dir=work,
                             max_subagents=5, auto_approve=True)
        async with Agent(config) as agent:
            await wait_for_pool(agent)
            began = time.perf_counter()
            async for _ in agent.stream("fan out"):
                pass
            return time.perf_counter() - began


async def mcp_fan_out(children: int, bound: int, cell: float, with_mcp: bool) -> float:
    """Wall time of `children` foreground children of a `cell`-second cell under `bound`, with one stdio MCP
    server configured (none of the children calls it) or none."""
    with tempfile.TemporaryDirectory() as work:
        script = SpawnScript(children=children, child_code=f"import time; time.sleep({cell})")
        servers = {"calc": {"command": sys.executable, "args": [str(CALC_SERVER)]}} if with_mcp else {}
        config = AgentConfig(model=FunctionModel(stream_function=script), working_dir=work, max_subagents=bound,
                             auto_approve=True, mcp_servers=servers)
        async with Agent(config) as agent:
            await wait_for_pool(agent)
            began = time.perf_counter()
            async for _ in agent.stream("fan out"):
                pass
            return time.perf_counter() - began


async def mcp_fan_outs(children: int = 30, bound: int = 10, cell: float = 0.5, runs: int = 3) -> None:
    floor = -(-children // bound) * cell
    walls: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(runs):  # alternated, so both see the same machine load
        for with_mcp in (False, True):
            walls[with_mcp].append(await mcp_fan_out(children, bound, cell, with_mcp))
    for with_mcp in (False, True):
        wall = statistics.median(walls[with_mcp])
        what = "one stdio MCP server configured, not called" if with_mcp else "no MCP server"
        print(f"fan-out: {children} children x {cell} s cell, max_subagents={bound}, {what}: "
              f"{wall:.2f} s (median of {runs}: {', '.join(f'{w:.2f}' for w in walls[with_mcp])}), "
              f"{wall / floor:.2f} x the {floor:.1f} s floor")


def kernel_pids() -> set[int]:
    """IPython kernels under this process: launched ones by their command line, forked ones by their sockets."""
    import psutil

    found = set()
    for process in psutil.Process().children(recursive=True):
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if "ipykernel_launcher" in " ".join(process.cmdline()) or any(
                KERNEL_SOCKET.search(c.laddr or "") is not None for c in process.net_connections(kind="unix")
            ):
                found.add(process.pid)
        except psutil.Error:
            continue
    return found


async def background_wave(children: int = 50, bound: int = 10, cell: float = 0.5) -> tuple[float, int, int]:
    """Wall time until `children` background children of a `cell`-second cell have ended; the most kernels of
    children alive at once (what `max_subagents` bounds), and the most kernels alive at once besides the main
    agent's (children's plus the kernel pool's idle and booting ones)."""
    with tempfile.TemporaryDirectory() as work:
        script = cell_children(children, cell, background=True, parent_done="started them all")

        config = AgentConfig(model=FunctionModel(stream_function=script), working_dir=work, max_subagents=bound,
                             auto_approve=True)
        async with Agent(config) as agent:
            await wait_for_pool(agent)
            main_kernel = kernel_pids()
            peak = peak_children = 0
            polling = True
            of_children: set[int] = set()
            """Every kernel a child has had (a pool kernel becomes one when a child takes it)."""

            async def poll() -> None:
                nonlocal peak, peak_children
                previous: set[int] = set()
                while polling:
                    for record in list(agent.tree.agents.values()):
                        kernel = getattr(record.agent, "kernel", None)
                        if record.parent_id is not None and kernel is not None and kernel.pid is not None:
                            of_children.add(kernel.pid)
                    now = await asyncio.to_thread(kernel_pids)
                    alive = (now & previous) - main_kernel  # seen twice: not one being killed
                    peak = max(peak, len(alive))
                    peak_children = max(peak_children, len(alive & of_children))
                    previous = now
                    await asyncio.sleep(0.02)

            poller = asyncio.create_task(poll())
            began = time.perf_counter()
            ended = 0
            async for event in agent.stream("start them"):
                ended += isinstance(event, SubagentFinished)
            events = agent.background_events()
            while ended < children:
                ended += isinstance(await anext(events), SubagentFinished)
            wall = time.perf_counter() - began
            polling = False
            await poller
            return wall, peak_children, peak


async def idle_memory(count: int = 5) -> tuple[float, float]:
    """Median PSS of `count` idle forked kernels and of one launched kernel, in MiB."""
    import psutil

    with tempfile.TemporaryDirectory() as work:
        zygote = KernelZygote()
        await zygote.start()
        forked = [Kernel(working_dir=work, launcher=zygote) for _ in range(count)]
        launched = Kernel(working_dir=work)
        try:
            await asyncio.gather(*(k.start() for k in [*forked, launched]))
            for kernel in [*forked, launched]:
                await kernel.execute("1 + 1")  # each has run a trivial cell: idle, not untouched
            await asyncio.sleep(1.0)

            def pss(kernel: Kernel) -> float:
                assert kernel.pid is not None
                return float(psutil.Process(kernel.pid).memory_full_info().pss) / 2**20

            return statistics.median(pss(k) for k in forked), pss(launched)
        finally:
            await asyncio.gather(*(k.shutdown(now=True) for k in [*forked, launched]), return_exceptions=True)
            await zygote.close()


async def lifecycle() -> None:
    wall, peak_children, peak = await background_wave()
    print(f"background: 50 children x 0.5 s cell, max_subagents=10: {wall:.2f} s wall "
          f"(ratio to the 2.5 s floor of five waves {wall / 2.5:.2f}); most child kernels alive at once: "
          f"{peak_children} (target <= 10); with the kernel pool's idle and booting ones: {peak}")
    forked, launched = await idle_memory()
    print(f"memory of an idle child kernel (PSS): forked {forked:.1f} MiB, launched {launched:.1f} MiB, "
          f"ratio {forked / launched:.2f}")


# -- (6) fan-out rows: wall time against the floor and a same-run baseline ------------------------


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms"


async def main(spawns: int) -> None:
    base_kernel = await kernel_starts(spawns)
    base_mcp = await mcp_connects(spawns)
    pooled = await spawn_latencies(spawns, pool_size=2, mcp=False)
    unpooled = await spawn_latencies(spawns, pool_size=0, mcp=False)
    pooled_mcp = await spawn_latencies(spawns, pool_size=2, mcp=True, mcp_pool_size=0)
    warm_mcp = await spawn_latencies(spawns, pool_size=2, mcp=True, mcp_pool_size=1)
    kernel_less = await spawn_latencies(spawns, pool_size=0, mcp=False, agent_type="thinker")
    wall = await fan_out()

    slower = max(statistics.median(base_kernel), statistics.median(base_mcp))
    print(f"baseline: plain kernel start {ms(base_kernel)}, plain MCP connect (calc server) {ms(base_mcp)}")
    print(f"spawn latency, pool, no MCP:    {ms(pooled)} (target <= 100 ms)")
    print(f"spawn latency, no pool, no MCP: {ms(unpooled)} "
          f"(ratio to kernel start {statistics.median(unpooled) / statistics.median(base_kernel):.2f})")
    print(f"spawn latency, kernel pool, 1 MCP, MCP pool off: {ms(pooled_mcp)}, "
          f"ratio to the slower of kernel start and MCP connect {statistics.median(pooled_mcp) / slower:.2f} "
          f"(target <= 1.2)")
    print(f"spawn latency, kernel pool, 1 MCP, MCP pool warm: {ms(warm_mcp)} (target <= 100 ms; "
          f"ratio to the same with the MCP pool off {statistics.median(warm_mcp) / statistics.median(pooled_mcp):.2f})")
    print(f"spawn latency, kernel-less type, no pool: {ms(kernel_less)} "
          f"(ratio to a general child without pool {statistics.median(kernel_less) / statistics.median(unpooled):.2f})")
    print(f"fan-out: 10 children x 1 s cell, max_subagents=5: {wall:.2f} s (target <= 2.6 s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spawns", type=int, default=7)
    parser.add_argument("--only", choices=["lifecycle", "mcp-fan-out", "fan-out"],
                        help="run only (3) background children and (4) memory, (5) the MCP fan-out, or (6) the "
                             "fan-out rows")
    parser.add_argument("--runs", type=int, default=1, help="runs of each fan-out row (6), medians reported")
    options = parser.parse_args()
    if options.only == "fan-out":
        asyncio.run(fan_out_rows(options.runs))
    else:
        work = {"lifecycle": lifecycle, "mcp-fan-out": mcp_fan_outs}.get(options.only or "")
        asyncio.run(work() if work is not None else main(options.spawns))
