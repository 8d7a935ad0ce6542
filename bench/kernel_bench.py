"""Kernel layer vs. raw jupyter_client, measured in one run on this machine.

    python bench/kernel_bench.py [--rounds 200] [--starts 5]

Prints, for our `Kernel` and for a bare `AsyncKernelManager` + client:
- the median round trip of a trivial cell (`x = 1`) until its iopub `idle`;
- the median time from "start" to the first result of `1 + 1`;
- how many of 10,000 lines printed with `flush=True` arrive.
Targets: round-trip ratio <= 1.25, start ratio <= 1.2, 10,000 of 10,000 lines.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

from jupyter_client import AsyncKernelManager

from freeact_sub.kernels.local import Kernel

LINES = 10_000


class RawKernel:
    """The baseline: jupyter_client used directly, as its documentation shows."""

    async def start(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.km = AsyncKernelManager(
            kernel_name="python3",
            transport="ipc",
            ip=os.path.join(self.dir.name, "socket"),
            connection_file=os.path.join(self.dir.name, "connection.json"),
        )
        await self.km.start_kernel()
        self.kc = self.km.client()
        self.kc.start_channels()
        await self.kc.wait_for_ready(timeout=60)

    async def execute(self, code: str) -> str:
        msg_id = self.kc.execute(code)
        parts = []
        while True:
            msg = await self.kc.get_iopub_msg()
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                parts.append(msg["content"]["text"])
            elif msg["msg_type"] == "execute_result":
                parts.append(msg["content"]["data"]["text/plain"])
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(parts)

    async def shutdown(self) -> None:
        self.kc.stop_channels()
        await self.km.shutdown_kernel(now=False)
        self.dir.cleanup()


class OurKernel:
    async def start(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.kernel = Kernel(working_dir=self.dir.name)
        await self.kernel.start()

    async def execute(self, code: str) -> str:
        return (await self.kernel.execute(code)).text

    async def shutdown(self) -> None:
        await self.kernel.shutdown()
        self.dir.cleanup()


async def start_to_first_result(kind: type[RawKernel] | type[OurKernel]) -> float:
    kernel = kind()
    began = time.perf_counter()
    await kernel.start()
    result = await kernel.execute("1 + 1")
    elapsed = time.perf_counter() - began
    assert "2" in result, result
    await kernel.shutdown()
    return elapsed


async def round_trips(raw: RawKernel, ours: OurKernel, rounds: int) -> tuple[float, float]:
    """Median round trips of both, measured alternately so that both see the same machine load."""
    for _ in range(10):  # warm up
        await raw.execute("x = 1")
        await ours.execute("x = 1")
    samples: dict[str, list[float]] = {"raw": [], "ours": []}
    for _ in range(rounds):
        for name, kernel in (("raw", raw), ("ours", ours)):
            began = time.perf_counter()
            await kernel.execute("x = 1")
            samples[name].append(time.perf_counter() - began)
    return statistics.median(samples["raw"]), statistics.median(samples["ours"])


async def main(rounds: int, starts: int) -> None:
    start_raw, start_ours = [], []
    for _ in range(starts):  # interleaved, so both see the same machine load
        start_raw.append(await start_to_first_result(RawKernel))
        start_ours.append(await start_to_first_result(OurKernel))

    raw, ours = RawKernel(), OurKernel()
    await raw.start()
    await ours.start()
    try:
        rt_raw, rt_ours = await round_trips(raw, ours, rounds)
        printed = await ours.execute(f"for i in range({LINES}):\n    print(i, flush=True)")
        lines = printed.splitlines()
        arrived = sum(1 for i, line in enumerate(lines) if line == str(i))
    finally:
        await raw.shutdown()
        await ours.shutdown()

    s_raw, s_ours = statistics.median(start_raw), statistics.median(start_ours)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores")
    print(f"round trip (median of {rounds}): raw {rt_raw * 1000:.2f} ms, ours {rt_ours * 1000:.2f} ms, "
          f"ratio {rt_ours / rt_raw:.2f} (target <= 1.25)")
    print(f"start to first result (median of {starts}): raw {s_raw:.3f} s, ours {s_ours:.3f} s, "
          f"ratio {s_ours / s_raw:.2f} (target <= 1.2)")
    print(f"flushed lines: {arrived} of {LINES} arrived in order (target {LINES} of {LINES})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.starts))
