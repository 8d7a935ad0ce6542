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
import json
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from freeact_sub import Agent, AgentConfig, ApprovalRequest, SubagentFinished, ToolOutput
from freeact_sub.kernels.launcher import KernelZygote
from freeact_sub.kernels.local import Kernel
from freeact_sub.mcp.servers import McpConnections

KERNEL_SOCKET = re.compile(r"freeact-sub-\d+/kernel-[^/]+/run/")
"""Where a kernel binds its sockets (`freeact_sub.sandbox.kernel_folders`)."""

CALC_SERVER = Path(__file__).resolve().parent.parent / "tests" / "servers" / "calc_server.py"


def first_prompt(messages: list[ModelMessage]) -> str:
    for part in messages[0].parts:
        if isinstance(part, UserPromptPart) and isinstance(part.content, str):
            return part.content
    return ""


class SpawnScript:
    """Parent: one round of `task` calls, then done. Child: note the time of its first request, answer at once."""

    def __init__(self, children: int, child_code: str | None = None, subagent_type: str = "general") -> None:
        self.children = children
        self.child_code = child_code
        self.subagent_type = subagent_type
        self.first_request: dict[str, float] = {}

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
        prompt = first_prompt(messages)
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if prompt.startswith("child"):
            self.first_request.setdefault(prompt, time.perf_counter())
            if self.child_code and not returns:
                yield {0: DeltaToolCall(name="execute_ipython_cell", json_args=json.dumps({"code": self.child_code}),
                                        tool_call_id="cell")}
            else:
                yield "child done"
            return
        if returns:
            yield "parent done"
            return
        yield {
            i: DeltaToolCall(name="task", tool_call_id=f"task-{i}",
                             json_args=json.dumps({"prompt": f"child {i}", "subagent_type": self.subagent_type}))
            for i in range(self.children)
        }


async def timed_spawn(agent: Agent, script: SpawnScript) -> float:
    """One parent turn that starts one child: seconds from approving the `task` call to the child's first request."""
    script.first_request.clear()
    approved_at = 0.0
    async for event in agent.stream("spawn one"):
        if isinstance(event, ApprovalRequest):
            if event.tool_name == "task":
                approved_at = time.perf_counter()
            event.approve(True)
    return script.first_request["child 0"] - approved_at


async def wait_for_pool(agent: Agent) -> None:
    """Until the kernel pool and the MCP pool (every configured server) are full."""
    tree, config = agent.tree, agent.config

    def warm() -> bool:
        mcp_ready = all(tree.mcp_pool.ready(name, spec, config.working_dir) >= config.mcp_pool_size
                        for name, spec in config.mcp_servers.items())
        return tree.pool.ready >= config.kernel_pool_size and mcp_ready

    while not warm():  # noqa: ASYNC110 - polling the pools' counters
        await asyncio.sleep(0.05)


KERNEL_LESS = {"thinker": {"description": "Reasons without code.", "disallowedTools": ["execute_ipython_cell"]}}


async def spawn_latencies(
    spawns: int, pool_size: int, mcp: bool, mcp_pool_size: int = 1, subagent_type: str = "general"
) -> list[float]:
    """One child per parent turn, `spawns` turns; latency = child's first request - approval of the task call."""
    samples = []
    with tempfile.TemporaryDirectory() as work:
        script = SpawnScript(children=1, subagent_type=subagent_type)
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
        code = f"import time; time.sleep({cell})"

        async def script(messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
            prompt = first_prompt(messages)
            returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
            if prompt.startswith("child"):
                if returns:
                    yield "child done"
                else:
                    yield {0: DeltaToolCall(name="execute_ipython_cell", json_args=json.dumps({"code": code}),
                                            tool_call_id="cell")}
            elif returns:
                yield "started them all"
            else:
                calls = [json.dumps({"prompt": f"child {i}", "run_in_background": True}) for i in range(children)]
                yield {i: DeltaToolCall(name="task", json_args=args, tool_call_id=f"task-{i}")
                       for i, args in enumerate(calls)}

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


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _tree_pss() -> float:
    """MiB of PSS of this process and every process under it."""
    import psutil

    total = 0
    for process in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        try:
            total += process.memory_full_info().pss
        except psutil.Error:
            continue
    return total / 2**20


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


def _cpu_seconds() -> float:
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
    code = f"import time; time.sleep({cell})"

    async def script(messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
        prompt = first_prompt(messages)
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if prompt.startswith("child"):
            if returns:
                yield "child done"
            else:
                yield {0: DeltaToolCall(name="execute_ipython_cell", json_args=json.dumps({"code": code}),
                                        tool_call_id="cell")}
        elif returns:
            yield "parent done"
        else:
            yield {i: DeltaToolCall(name="task", tool_call_id=f"task-{i}", json_args=json.dumps(
                {"prompt": f"child {i}", "run_in_background": background})) for i in range(children)}

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
                    running.difference_update([pid for pid in running if not _alive(pid)])  # a pid is not reused
                    peak_children = max(peak_children, len(running))
                    peak_pool = max(peak_pool, tree.pool.ready + getattr(tree.pool, "booting", 0))
                    await asyncio.sleep(0.005)

            async def weigh() -> None:
                nonlocal peak_mib
                while watching:
                    peak_mib = max(peak_mib or 0.0, await asyncio.to_thread(_tree_pss))
                    await asyncio.sleep(0.2)

            watchers = [asyncio.create_task(watch()), *([asyncio.create_task(weigh())] if memory else [])]
            done = 0
            cpu = _cpu_seconds()
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
            cpu = _cpu_seconds() - cpu  # the kernels that ended were reaped by the zygote: in its children's times
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


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms"


async def main(spawns: int) -> None:
    base_kernel = await kernel_starts(spawns)
    base_mcp = await mcp_connects(spawns)
    pooled = await spawn_latencies(spawns, pool_size=2, mcp=False)
    unpooled = await spawn_latencies(spawns, pool_size=0, mcp=False)
    pooled_mcp = await spawn_latencies(spawns, pool_size=2, mcp=True, mcp_pool_size=0)
    warm_mcp = await spawn_latencies(spawns, pool_size=2, mcp=True, mcp_pool_size=1)
    kernel_less = await spawn_latencies(spawns, pool_size=0, mcp=False, subagent_type="thinker")
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
