"""The benchmark suite: every number a person comparing code-action agents asks for, offline, in one run.

    python -m bench [--quick] [--out DIR]

Run from the repository's root (it uses the scripted model, real kernels and a real stdio MCP
server from `tests/servers/`; no API key, no network). It measures, on this machine, now:

- spawn: from approving a `task` call to the child's first model request, p50 / p95, for a
  child with a kernel (pool warm), a child with one stdio MCP server configured (pools warm),
  and a kernel-less agent type (no pool);
- fan-out: N children each running a cell of fixed length under a bound, wall time against
  the floor (waves x cell), for N = 10, 50, 200;
- fan-out against a misbehaving provider: 50 children over real HTTP while 20 % of requests get
  `429` (`Retry-After: 0.2`) and 5 % of streams drop, against the same fan-out without faults
  (`bench/retry_bench.py`): all done, the wall-time ratio, and the peak of requests in flight;
- subagents from code: the same children started by one cell (`map_tasks`) against `task` calls in one
  response, same run (`bench/code_tasks_bench.py`): wall time and the tokens of the results the parent reads;
- telemetry: the same fan-out with OpenTelemetry traces and metrics exported over OTLP/HTTP to a local receiver,
  against telemetry off, runs alternated (`bench/telemetry_bench.py`): wall and host-CPU ratios (target <= 1.05);
- where a person waits: `--help`, the interactive prompt (and the banner), a one-shot, an ACP client's
  `initialize` and `session/new`, each the installed command run anew in a fresh folder, against the goals and
  this interpreter's own start (`bench/waits_bench.py`);
- approval round trip: the `ApprovalRequest` leaves the agent -> the consumer decides ->
  the cell starts in the kernel (read from the kernel's own clock);
- per-cell overhead: a trivial cell's round trip through our kernel client against raw
  `jupyter_client`, and a whole agent round (model response + cell) without a session store;
- session store: the same round with and without saving the session, and loading a session;
- network by host: a 50 MB download and 200 small requests through the sandbox's proxy against direct, the
  proxy's CPU, and a forked spawn with a profile's default limits against none (`bench/net_bench.py`).

It prints a table, writes `bench.json` and draws `bench.png` (one summary figure) into
`--out` (default `./bench-results`). Timings depend on the machine and on what else runs:
compare ratios measured in the same run, and note the load (`os.getloadavg()`, in the JSON).
`--quick` runs each part small (a smoke test of the suite, not a measurement).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python -m bench` from the root has it; a copy run elsewhere may not
    sys.path.insert(0, str(_ROOT))


@dataclass(frozen=True)
class Sizes:
    """How much of each part to run."""

    spawns: int
    fan_outs: tuple[tuple[int, int, float], ...]
    """(children, bound, cell seconds) per fan-out row."""
    faulty_fan_out: tuple[int, int, float, int]
    """(children, bound, cell seconds, runs of each) of the fan-out against a provider that misbehaves."""
    code_tasks: tuple[int, int, float]
    """(children, bound, cell seconds) of subagents from one cell against as many `task` calls."""
    approvals: int
    cell_rounds: int
    store_rounds: int
    session_messages: int
    telemetry: tuple[int, int, float, int] = (20, 4, 0.2, 3)
    """(children, bound, cell seconds, pairs of runs) of the fan-out with telemetry on against off."""


FULL = Sizes(
    spawns=20,
    fan_outs=((10, 5, 1.0), (50, 10, 0.5), (200, 20, 0.5)),
    faulty_fan_out=(50, 10, 0.5, 3),
    code_tasks=(50, 10, 0.5),
    approvals=40,
    cell_rounds=200,
    store_rounds=100,
    session_messages=1000,
)
QUICK = Sizes(spawns=3, fan_outs=((4, 2, 0.2),), faulty_fan_out=(4, 2, 0.2, 1), code_tasks=(4, 2, 0.2),
              telemetry=(4, 2, 0.2, 1), approvals=5,
              cell_rounds=20,
              store_rounds=20, session_messages=50)


def percentiles(samples: list[float]) -> dict[str, Any]:
    """p50 and p95 (seconds) and the samples."""
    ordered = sorted(samples)
    p95 = statistics.quantiles(ordered, n=20, method="inclusive")[-1] if len(ordered) > 1 else ordered[0]
    return {"p50": statistics.median(ordered), "p95": p95, "n": len(ordered), "samples": ordered}


# -- the parts -----------------------------------------------------------------------------------


async def spawn(sizes: Sizes, timelines: Path | None) -> dict[str, Any]:
    from bench.subagent_bench import spawn_latencies

    return {
        "kernel": percentiles(await spawn_latencies(sizes.spawns, pool_size=2, mcp=False)),
        "mcp": percentiles(await spawn_latencies(sizes.spawns, pool_size=2, mcp=True, mcp_pool_size=1)),
        "kernel_less": percentiles(
            await spawn_latencies(sizes.spawns, pool_size=0, mcp=False, agent_type="thinker")
        ),
    }


async def fan_out(sizes: Sizes, timelines: Path | None) -> list[dict[str, Any]]:
    """Each row: wall time against the floor, and where a child's time went (mean seconds per state, from the
    run's timeline); with `timelines`, each run's timeline is drawn there as `fan-out-<N>.svg`."""
    import tempfile

    from pydantic_ai.models.function import FunctionModel

    from bench.spawning import SpawnScript, wait_for_pool
    from freeact_sub import Agent, AgentConfig, TimelineBuilder

    rows = []
    for children, bound, cell in sizes.fan_outs:
        floor = -(-children // bound) * cell
        builder = TimelineBuilder()
        with tempfile.TemporaryDirectory() as work:
            script = SpawnScript(children=children, child_code=f"import time; time.sleep({cell})")
            config = AgentConfig(
                model=FunctionModel(stream_function=script),
                working_dir=Path(work),
                max_subagents=bound,
                auto_approve=True,
            )
            async with Agent(config) as agent:
                await wait_for_pool(agent)
                began = time.perf_counter()
                async for event in agent.stream("fan out"):
                    builder.add(event)
                wall = time.perf_counter() - began
        picture = builder.build()
        lanes = picture.lanes[1:]
        per_state: dict[str, float] = {}
        for lane in lanes:
            for span in lane.spans:
                per_state[span.state] = per_state.get(span.state, 0.0) + span.duration(picture.end)
        row = {
            "children": children,
            "bound": bound,
            "cell": cell,
            "floor": floor,
            "wall": wall,
            "ratio": wall / floor,
            "lost": children - sum(1 for lane in lanes if lane.status == "done"),
            "per_child": {state: total / max(1, len(lanes)) for state, total in per_state.items()},
        }
        if timelines is not None:
            row["timeline"] = str(picture.save(timelines / f"fan-out-{children}.svg"))
        rows.append(row)
    return rows


async def per_child(sizes: Sizes, timelines: Path | None) -> dict[str, float]:
    """CPU ms per child, per phase, host and kernel side, against a bare forked kernel (`bench/child_budget.py`)."""
    from bench.child_budget import measure

    children, bound, _cell = sizes.fan_outs[-1]
    return await measure(min(children, 30), min(bound, 10), 1)


async def waits(sizes: Sizes, timelines: Path | None) -> dict[str, Any] | None:
    """Where a person waits (`bench/waits_bench.py`): --help, the prompt, a one-shot, ACP's first answers."""
    from bench import waits_bench

    def measure() -> dict[str, Any] | None:
        if not os.path.exists(waits_bench.COMMAND):
            print(f"… waits skipped: no freeact-sub command next to {sys.executable}", file=sys.stderr)
            return None
        return waits_bench.measure(1 if sizes is QUICK else 3)

    return await asyncio.to_thread(measure)


async def retries(sizes: Sizes, timelines: Path | None) -> dict[str, Any]:
    from bench.retry_bench import compare

    children, bound, cell, repeats = sizes.faulty_fan_out
    return await compare(children, bound, cell, repeats)


async def tasks_from_code(sizes: Sizes, timelines: Path | None) -> dict[str, Any]:
    from bench.code_tasks_bench import compare

    children, bound, cell = sizes.code_tasks
    return await compare(children, bound, cell, 1 if sizes is QUICK else 3)


async def telemetry(sizes: Sizes, timelines: Path | None) -> dict[str, Any]:
    from bench.telemetry_bench import compare

    return await compare(*sizes.telemetry)


async def approval_round_trip(sizes: Sizes, timelines: Path | None) -> dict[str, Any]:
    """Rounds of one turn, each a cell that prints the kernel's clock; the consumer approves each request at once."""
    import tempfile

    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    from freeact_sub import Agent, AgentConfig, ApprovalRequest, CodeExecutionOutput

    counter = iter(range(10**9))
    code = json.dumps({"code": "import time; print(repr(time.time()))"})

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        yield {0: DeltaToolCall(name="execute_ipython_cell", json_args=code, tool_call_id=f"call-{next(counter)}")}

    to_consumer, to_cell, total = [], [], []
    with tempfile.TemporaryDirectory() as work:
        config = AgentConfig(
            model=FunctionModel(stream_function=stream),
            working_dir=Path(work),
            enable_subagents=False,
            save_sessions=False,
        )
        async with Agent(config) as agent:
            requests: dict[str, ApprovalRequest] = {}
            async for event in agent.stream("loop", max_turns=sizes.approvals + 1):
                if isinstance(event, ApprovalRequest):
                    to_consumer.append(time.time() - event.at)
                    event.approve()
                    requests[event.tool_call_id] = event
                elif isinstance(event, CodeExecutionOutput) and event.tool_call_id in requests:
                    request = requests[event.tool_call_id]
                    started = float(event.content.strip())
                    assert request.decided_at is not None
                    to_cell.append(started - request.decided_at)
                    total.append(started - request.at)
    return {
        "request_to_consumer": percentiles(to_consumer),
        "decision_to_cell_start": percentiles(to_cell),
        "request_to_cell_start": percentiles(total),
    }


async def cell_overhead(sizes: Sizes, timelines: Path | None) -> dict[str, Any]:
    from bench.kernel_bench import OurKernel, RawKernel, round_trips

    raw, ours = RawKernel(), OurKernel()
    await raw.start()
    await ours.start()
    try:
        rt_raw, rt_ours = await round_trips(raw, ours, sizes.cell_rounds)
    finally:
        await raw.shutdown()
        await ours.shutdown()
    return {"raw_jupyter_client": rt_raw, "ours": rt_ours, "ratio": rt_ours / rt_raw, "rounds": sizes.cell_rounds}


async def session_store(sizes: Sizes, timelines: Path | None) -> dict[str, Any]:
    from bench import session_bench  # measures the store's own share of a round while it is imported

    with_store, without = await session_bench.overhead(sizes.store_rounds)
    in_store = statistics.median(session_bench.SYNC_TIMES) * 2 if session_bench.SYNC_TIMES else 0.0
    loaded, history_time, event_time = await asyncio.to_thread(session_bench.load_times, sizes.session_messages, 5)
    return {
        "round_without_store": without,
        "round_with_store": with_store,
        "overhead": (with_store - without) / without,
        "in_store_per_round": in_store,
        "load_messages": loaded,
        "load_history": history_time,
        "load_events": event_time,
    }


async def network(sizes: Sizes, timelines: Path | None) -> dict[str, Any]:
    from bench import net_bench
    from freeact_sub.sandbox import platform_problem

    if (problem := platform_problem()) is not None:
        return {"skipped": problem}
    return await net_bench.measure(1 if sizes is QUICK else 3, sizes.spawns)


async def run(sizes: Sizes, timelines: Path | None = None) -> dict[str, Any]:
    began = time.perf_counter()
    results: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "load": list(os.getloadavg()),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "quick": sizes is QUICK,
    }
    steps = (
        ("waits", waits),
        ("cell", cell_overhead),
        ("approval", approval_round_trip),
        ("spawn", spawn),
        ("fan_out", fan_out),
        ("per_child", per_child),
        ("retries", retries),
        ("tasks_from_code", tasks_from_code),
        ("telemetry", telemetry),
        ("session", session_store),
        ("network", network),
    )
    for name, step in steps:
        print(f"… {name}", file=sys.stderr, flush=True)
        results[name] = await step(sizes, timelines)
    results["machine"]["load_after"] = list(os.getloadavg())
    results["seconds"] = time.perf_counter() - began
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="each part small: checks the suite runs, measures little")
    parser.add_argument("--out", metavar="DIR", default="bench-results", help="where bench.json and bench.png go")
    parser.add_argument("--no-plot", action="store_true", help="skip the figure and the fan-out runs' timelines")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = asyncio.run(run(QUICK if args.quick else FULL, None if args.no_plot else out))
    from rich.console import Console

    from bench.report import plot, table

    Console(width=None if sys.stdout.isatty() else 120).print(table(results))
    machine = results["machine"]
    print(
        f"{machine['cpus']} cores, load {machine['load'][0]:.2f} before and {machine['load_after'][0]:.2f} after; "
        f"{results['seconds']:.0f} s in all"
    )
    (out / "bench.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    written = [out / "bench.json"]
    if not args.no_plot:
        plot(results, out / "bench.png")
        written.append(out / "bench.png")
    print("wrote " + ", ".join(str(path) for path in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
