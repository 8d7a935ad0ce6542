"""The fan-out rows of issue 38, this code against a baseline, alternated run by run: each run in a process of its
own, so both are measured by this file on the same machine at about the same load.

    python bench/fan_out_pairs.py --baseline DIR [--runs 3] [--rows spawn,10,50,200,http50,mcp30]

DIR holds the baseline's `freeact_sub` (`git archive main freeact_sub tools | tar -x -C DIR`). Without `--baseline`,
only this code. Each row prints, per code, the median wall time against the row's floor (the cell length times
the waves), and the CPU a child (this process, kernels, zygote, servers; all of it on 2 cores is a floor too).
Rows: `spawn` (the spawn p50, pool warm), `10` (10 x 1 s, bound 5), `50` (50 x 0.5 s, bound 10), `200`
(200 x 0.5 s, bound 20), `http50` (50 x 0.5 s, bound 10, a scripted OpenAI-protocol provider over real HTTP),
`mcp30` (30 x 0.5 s, bound 10, over HTTP, one stdio MCP server configured that no child calls). The HTTP rows'
provider runs in a process of its own (`bench/servers/scripted_provider.py`), as a real provider does; its CPU is
counted with the rest (`--provider thread`: in a thread of the host, as before, where it also holds the host's
interpreter lock).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
if "--root" in sys.argv:  # the `freeact_sub` measured: a baseline's, else this checkout's
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--root") + 1]).resolve()))

__all__ = ["ROWS", "one_row"]

SPAWNS = 30
PROVIDER = "process"
"""Where the HTTP rows' scripted provider runs (`--provider`)."""
"""Spawns a run of the `spawn` row (one child a parent turn, the pool warm before each)."""
ROWS: dict[str, tuple[int, int, float, str]] = {  # children, bound, cell seconds, how
    "10": (10, 5, 1.0, "function"),
    "50": (50, 10, 0.5, "function"),
    "200": (200, 20, 0.5, "function"),
    "http50": (50, 10, 0.5, "http"),
    "mcp30": (30, 10, 0.5, "http+mcp"),
}


@contextlib.contextmanager
def _provider(cell: float, where: str) -> Iterator[str]:
    """The scripted provider's base URL: served by a process of its own (`process`, as a real provider is), or by
    a thread of this one (`thread`: its CPU and its hold on the interpreter lock are then the host's)."""
    if where == "thread":
        from bench.retry_bench import _responder
        from freeact_sub.demo import DemoServer

        with DemoServer(responder=_responder(cell), chunk_delay=0.001).start() as server:
            yield server.base_url_for("openai")
        return
    script = Path(__file__).resolve().parent / "servers" / "scripted_provider.py"
    process = subprocess.Popen(
        [sys.executable, str(script), str(cell)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url:
            raise RuntimeError("the scripted provider did not start")
        yield url
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(5.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _over_http(children: int, bound: int, cell: float, mcp: bool, provider: str) -> dict[str, float]:
    from bench.fan_out_runs import cpu_seconds
    from bench.spawning import CALC_SERVER, wait_for_pool
    from freeact_sub import Agent, AgentConfig, SubagentFinished

    servers: dict[str, Any] = {"calc": {"command": sys.executable, "args": [str(CALC_SERVER)]}} if mcp else {}
    with _provider(cell, provider) as base_url, tempfile.TemporaryDirectory() as work:
        config = AgentConfig(
            model="openai:scripted",
            base_url=base_url,
            working_dir=Path(work),
            max_subagents=bound,
            auto_approve=True,
            save_sessions=False,
            mcp_servers=servers,
        )
        async with Agent(config) as agent:
            await wait_for_pool(agent)
            cpu, began = cpu_seconds(), time.perf_counter()
            done = 0
            async for event in agent.stream(f"fan out {children}"):
                done += isinstance(event, SubagentFinished) and event.status == "done"
            wall, cpu = time.perf_counter() - began, cpu_seconds() - cpu
    return {"wall": wall, "cpu": cpu, "done": done}


async def one_row(name: str, provider: str = "process") -> dict[str, float]:
    """One run of the row `name` in this process, after a small fan-out that pays the process's one-time costs;
    `provider`: where the HTTP rows' scripted provider runs (`process` or `thread`)."""
    from bench.fan_out_runs import fan_out_run

    await fan_out_run(3, 3, 0.0)
    if name == "spawn":
        from bench.subagent_bench import spawn_latencies

        samples = await spawn_latencies(SPAWNS, pool_size=2, mcp=False)
        return {"p50": statistics.median(samples), "p95": sorted(samples)[int(0.95 * (len(samples) - 1))]}
    children, bound, cell, how = ROWS[name]
    if how == "function":
        result = await fan_out_run(children, bound, cell)
        return {"wall": result.wall, "cpu": result.cpu, "done": result.done}
    return await _over_http(children, bound, cell, mcp=how == "http+mcp", provider=provider)


def _run(name: str, root: str | None) -> dict[str, float]:
    command = [sys.executable, __file__, "--one", name, "--provider", PROVIDER, *(["--root", root] if root else [])]
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=os.environ.copy())
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(rows: list[str], runs: int, baseline: str | None) -> None:
    labels = ["baseline", "this code"] if baseline else ["this code"]
    for name in rows:
        if name == "spawn":
            spawns: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
            for run in range(runs):
                for label in labels if run % 2 == 0 else labels[::-1]:
                    spawns[label].append(_run(name, baseline if label == "baseline" else None))
            print(f"spawn, pool warm ({SPAWNS} spawns a run; approved task call -> the child's first model request):")
            for label, found in spawns.items():
                print(
                    f"  {label:<10} p50 {1000 * statistics.median(r['p50'] for r in found):.1f} ms (runs: "
                    + ", ".join(f"{1000 * r['p50']:.1f}" for r in found)
                    + "); p95 "
                    + ", ".join(f"{1000 * r['p95']:.1f}" for r in found),
                    flush=True,
                )
            continue
        children, bound, cell, how = ROWS[name]
        floor = -(-children // bound) * cell
        results: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
        for run in range(runs):
            for label in labels if run % 2 == 0 else labels[::-1]:
                results[label].append(_run(name, baseline if label == "baseline" else None))
        print(f"{children} x {cell:g} s, bound {bound} ({how}), floor {floor:.1f} s:")
        for label, found in results.items():
            wall = statistics.median(r["wall"] for r in found)
            cpu = statistics.median(r["cpu"] for r in found) / children * 1000
            lost = max(children - r["done"] for r in found)
            print(
                f"  {label:<10} {wall:6.2f} s = {wall / floor:.3f} x the floor; CPU a child {cpu:.0f} ms; "
                f"lost {lost}; walls " + ", ".join(f"{r['wall']:.2f}" for r in found),
                flush=True,
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--rows", default=",".join(["spawn", *ROWS]), help="comma-separated, of: spawn, " + ", ".join(ROWS)
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--provider",
        choices=("process", "thread"),
        default="process",
        help="where the HTTP rows' scripted provider runs: a process of its own (default), or a thread of the host",
    )
    parser.add_argument("--baseline", metavar="DIR", help="also measure the freeact_sub in DIR, alternated")
    parser.add_argument("--root", metavar="DIR", help=argparse.SUPPRESS)  # read above, before the imports
    parser.add_argument("--one", metavar="ROW", help=argparse.SUPPRESS)  # one run, as JSON (what each process does)
    arguments = parser.parse_args()
    PROVIDER = arguments.provider
    if arguments.one:
        print(json.dumps(asyncio.run(one_row(arguments.one, arguments.provider))))
    else:
        main(arguments.rows.split(","), arguments.runs, arguments.baseline)
