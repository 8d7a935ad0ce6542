"""What telemetry costs a fan-out (issue 42): N children, each running one cell, with telemetry off and on,
runs alternated in one process so that the machine's load falls on both alike.

    python -m bench.telemetry_bench [--children 20] [--bound 4] [--cell 0.2] [--pairs 3]

On: the SDK's own providers exporting over OTLP/HTTP (batch span processor, periodic metric reader) to a
receiver on 127.0.0.1 that answers 200 (a separate process, so its CPU is not counted here). Measured for
each run: the parent's turn's wall time and the host process's CPU time during it (`time.process_time()`,
all its threads: the spans, pydantic-ai's model request spans, the exporters' encoding and sending). The
kernels are other processes and run the same cells either way. Target: on / off <= 1.05 (wall, medians).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic_ai.models.function import FunctionModel

from bench.spawning import SpawnScript, wait_for_pool
from freeact_sub import Agent, AgentConfig

__all__ = ["compare"]

RECEIVER = """
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *args): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


async def one_run(children: int, bound: int, cell: float, telemetry: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as work:
        script = SpawnScript(children=children, child_code=f"import time; time.sleep({cell})")
        config = AgentConfig(model=FunctionModel(stream_function=script), working_dir=Path(work),
                             max_subagents=bound, auto_approve=True, telemetry=telemetry)
        async with Agent(config) as agent:
            await wait_for_pool(agent)
            cpu, began = time.process_time(), time.perf_counter()
            async for _ in agent.stream("fan out"):
                pass
            wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    return {"wall": wall, "cpu": cpu}


def start_receiver() -> tuple[subprocess.Popen[str], str]:
    """The OTLP receiver (any POST answered 200) in a process of its own, and its port."""
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    assert receiver.stdout is not None
    return receiver, receiver.stdout.readline().strip()


async def compare(children: int, bound: int, cell: float, pairs: int) -> dict[str, Any]:
    """Alternate off and on runs (off first in odd pairs, on first in even ones); medians and their ratios."""
    receiver, port = start_receiver()
    try:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
        runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for pair in range(pairs):
            for telemetry in ((False, True) if pair % 2 == 0 else (True, False)):
                if not telemetry:  # the variable alone turns it on: off means without it
                    endpoint = os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT")
                runs[telemetry].append(await one_run(children, bound, cell, telemetry))
                if not telemetry:
                    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    finally:
        os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        receiver.terminate()
        receiver.wait(10)
    median = {on: {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu")} for on, rs in runs.items()}
    return {
        "children": children, "bound": bound, "cell": cell, "pairs": pairs,
        "off": median[False], "on": median[True],
        "wall_ratio": median[True]["wall"] / median[False]["wall"],
        "cpu_ratio": median[True]["cpu"] / median[False]["cpu"],
        "load": os.getloadavg(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--children", type=int, default=20)
    parser.add_argument("--bound", type=int, default=4)
    parser.add_argument("--cell", type=float, default=0.2)
    parser.add_argument("--pairs", type=int, default=3)
    options = parser.parse_args()
    result = asyncio.run(compare(options.children, options.bound, options.cell, options.pairs))
    off, on = result["off"], result["on"]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {result['load'][0]:.1f}")
    print(f"fan-out of {result['children']} children (bound {result['bound']}, {result['cell']} s cells), "
          f"medians of {result['pairs']} runs each, alternated")
    print(f"telemetry off: {off['wall']:.2f} s wall, {off['cpu']:.2f} s host CPU")
    print(f"telemetry on:  {on['wall']:.2f} s wall, {on['cpu']:.2f} s host CPU")
    print(f"ratio on/off: wall {result['wall_ratio']:.3f} (target <= 1.05), CPU {result['cpu_ratio']:.3f}")
