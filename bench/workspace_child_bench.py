"""An isolated child's start against a plain one's, through the whole agent, alternated in one run.

    python bench/workspace_child_bench.py [--files 10000] [--runs 6]

Each run starts one child that runs one cell (`1`); the row is the time from the child's start (`SubagentStarted`)
to its cell's output, and the host's CPU for the whole `task` call. A plain child takes a pooled kernel (booted
while the parent waited); an isolated one gets a kernel forked for it from the zygote (a pooled kernel has no view
of its own), then its change set is read. Both with the zygote and the pool warm.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from freeact_sub import Agent, AgentConfig, CodeExecutionOutput, SubagentStarted
from tests.scripting import Call, Router, Script, drive, until


async def main(files: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as place:
        folder = Path(place)
        for n in range(files):
            sub = folder / f"d{n // 100}"
            sub.mkdir(parents=True, exist_ok=True)
            (sub / f"f{n}.txt").write_text(f"{n}\n")
        main_script = Script()
        router = Router({"MAIN": main_script})
        config = AgentConfig(model=router.model, working_dir=folder, auto_approve=True, prestart_pools=True,
                             kernel_pool_size=2, save_sessions=False)
        found: dict[str, list[float]] = {"shared": [], "copy-on-write": []}
        cpu: dict[str, list[float]] = {"shared": [], "copy-on-write": []}
        async with Agent(config) as agent:
            await until(lambda: agent.tree.supplies.zygote.running, "the zygote runs", limit=120)
            for run in range(runs * 2):
                isolation = ("shared", "copy-on-write")[run % 2]
                key = f"KID-{run} "
                router.scripts[key] = Script([Call("execute_ipython_cell", {"code": "1"})], ["ok"])
                main_script.add([Call("task", {"prompt": f"{key}go", "isolation": isolation}, id=f"t{run}")], ["done"])
                await asyncio.sleep(1.0)  # the pool tops up between runs
                marks: dict[str, float] = {}

                def note(event: object, marks: dict[str, float] = marks) -> None:
                    if isinstance(event, SubagentStarted):
                        marks["started"] = time.perf_counter()
                    elif isinstance(event, CodeExecutionOutput) and "output" not in marks:
                        marks["output"] = time.perf_counter()

                before = time.process_time()
                await drive(agent.stream("MAIN go"), True, on_event=note, limit=120)
                cpu[isolation].append(time.process_time() - before)
                found[isolation].append(marks["output"] - marks["started"])
        med = statistics.median
        for kind in found:
            print(f"{kind:14} start → first cell {med(found[kind]) * 1e3:7.1f} ms   host CPU per task call "
                  f"{med(cpu[kind]) * 1e3:6.1f} ms   ({len(found[kind])} runs, folder of {files} files)")
        print(f"copy-on-write / shared: start {med(found['copy-on-write']) / med(found['shared']):.2f}x, "
              f"+{(med(found['copy-on-write']) - med(found['shared'])) * 1e3:.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=6)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.files, arguments.runs))
