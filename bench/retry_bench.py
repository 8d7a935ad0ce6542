"""A fan-out against a provider that misbehaves: each child's cell sleeps, while the scripted server (real HTTP,
the OpenAI protocol) answers a share of all requests with `429` (`Retry-After` 0.2 s) and drops a share of the
streams mid-response. The same fan-out without faults, in the same run, is what it is compared with.

    python -m bench.retry_bench [children] [bound] [cell]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.spawning import wait_for_pool
from freeact_sub import Agent, AgentConfig, ModelRetry, SubagentFinished
from freeact_sub.demo import DemoServer
from freeact_sub.demo.faults import Fault, RandomFaults
from freeact_sub.demo.scenario import Reply, ToolCall

RATE_LIMITED = 0.20
"""Share of requests answered `429 Too Many Requests` with `Retry-After: 0.2`."""
DROPPED = 0.05
"""Share of streams cut after three chunks."""


def _responder(cell: float) -> Any:
    def respond(request: Mapping[str, Any]) -> Reply:
        messages = request["messages"]
        first = next(str(m.get("content")) for m in messages if m.get("role") == "user")
        rounds = sum(1 for m in messages if m.get("role") == "assistant")
        if first.startswith("fan out "):
            if rounds:
                return Reply(text="all done")
            count = int(first.split()[2])
            calls = tuple(ToolCall("task", {"prompt": f"CHILD-{i}: sleep"}, id=f"task-{i}") for i in range(count))
            return Reply(text="Starting them. ", tool_calls=calls)
        if rounds:
            return Reply(text=f"{first.split(':')[0]} slept")
        code = {"code": f"import time; time.sleep({cell})"}
        return Reply(text="Sleeping. ", tool_calls=(ToolCall("execute_ipython_cell", code, id="sleep"),))

    return respond


async def faulty_fan_out(children: int, bound: int, cell: float, *, faults: bool) -> dict[str, Any]:
    """One fan-out over HTTP; with `faults`, RATE_LIMITED and DROPPED of the requests fail."""
    injected = RandomFaults([(RATE_LIMITED, Fault(status=429, retry_after=0.2)), (DROPPED, Fault(kind="cut", after=3))],
                            seed=27) if faults else None
    with DemoServer(responder=_responder(cell), chunk_delay=0.001, faults=injected).start() as server, \
            tempfile.TemporaryDirectory() as work:
        config = AgentConfig(model="openai:scripted", base_url=server.base_url_for("openai"), working_dir=Path(work),
                             max_subagents=bound, auto_approve=True, save_sessions=False)
        async with Agent(config) as agent:
            await wait_for_pool(agent)
            began = time.perf_counter()
            finished: list[SubagentFinished] = []
            retries = 0
            async for event in agent.stream(f"fan out {children}"):
                if isinstance(event, SubagentFinished):
                    finished.append(event)
                elif isinstance(event, ModelRetry):
                    retries += 1
            wall = time.perf_counter() - began
            peak, limit = agent.tree.model_requests.peak, agent.tree.model_requests.limit
    return {
        "children": children,
        "bound": bound,
        "cell": cell,
        "wall": wall,
        "done": sum(1 for event in finished if event.status == "done"),
        "retries": retries,
        "peak_in_flight": peak,
        "max_model_requests": limit,
        "requests": injected.requests if injected is not None else None,
        "injected": dict(injected.counts) if injected is not None else {},
    }


async def compare(children: int, bound: int, cell: float, repeats: int = 2) -> dict[str, Any]:
    """The fan-out without faults and with them, alternating, `repeats` times each: the best faulty wall time against
    the best clean one (the best of a few is the least disturbed by whatever else the machine runs)."""
    clean: list[dict[str, Any]] = []
    faulty: list[dict[str, Any]] = []
    for _ in range(repeats):
        clean.append(await faulty_fan_out(children, bound, cell, faults=False))
        faulty.append(await faulty_fan_out(children, bound, cell, faults=True))
    best_clean = min(clean, key=lambda row: row["wall"])
    best = min(faulty, key=lambda row: row["wall"])
    return {**best, "clean_wall": best_clean["wall"], "ratio": best["wall"] / best_clean["wall"],
            "walls": [row["wall"] for row in faulty], "clean_walls": [row["wall"] for row in clean],
            "all_done": all(row["done"] == children for row in clean + faulty)}


def main(argv: list[str]) -> int:
    children, bound, cell = (int(argv[0]) if argv else 50, int(argv[1]) if len(argv) > 1 else 10,
                             float(argv[2]) if len(argv) > 2 else 0.5)
    row = asyncio.run(compare(children, bound, cell))
    print(f"{row['children']} children x {row['cell']:g} s cell, bound {row['bound']}, "
          f"{RATE_LIMITED:.0%} 429 (Retry-After 0.2 s) + {DROPPED:.0%} dropped streams: {row['done']}/{children} done "
          f"(every run: {row['all_done']}), "
          f"{row['wall']:.2f} s = {row['ratio']:.2f} x the {row['clean_wall']:.2f} s without faults; "
          f"{row['retries']} retries ({row['injected']} injected of {row['requests']} requests); "
          f"peak {row['peak_in_flight']} requests in flight (max_model_requests {row['max_model_requests']}); "
          f"walls {[round(w, 2) for w in row['walls']]} against {[round(w, 2) for w in row['clean_walls']]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
