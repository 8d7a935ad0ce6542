"""What network by host and limits cost: traffic through the sandbox's proxy vs. direct, and spawn with limits.

    python bench/net_bench.py [--rounds 3] [--spawns 20] [--modes copy,splice]

A local HTTP server on 127.0.0.1 (a process of its own) serves 50 MB and a small page. Two confined kernels run
the same cell, in turns: one sharing the host's network (what `workspace` had before network on meant the public
internet only: it connects to 127.0.0.1 directly), one under a profile listing `bench.test` (a name the proxy
resolves to 127.0.0.1), whose traffic goes through the host's filtering proxy:
- a 50 MB download (plain HTTP through the proxy, and through a CONNECT tunnel as HTTPS would go);
- 200 small requests, each on a new connection (as urllib makes them).
Times are taken inside the cell. Each round measures direct, then every mode of the proxy's relay (`--modes`:
`splice` or the copy loop, `:<KiB>` the most one direction holds), in turns. The proxy's CPU (its loop and lookup
threads in the host) is reported per mode. Targets: 50 MB <= 1.10x direct, 200 small requests <= 1.30x.
Then spawn (forked by the zygote, as pooled and child kernels are) under `workspace` with its default limits
(memory, processes: a pids cgroup where the host can make one) against the same profile without limits.
Target: <= +5 ms.

The proxy alone, against the floor of any relay and against other code: `python -m bench.proxy_alone`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from freeact_sub.kernels.launcher import KernelZygote
from freeact_sub.kernels.local import Kernel
from freeact_sub.sandbox import BUILT_IN_PROFILES, SandboxProfile, platform_problem
from freeact_sub.sandbox.limits import Limits
from freeact_sub.sandbox.proxy import proxy, set_resolver
from freeact_sub.sandbox.relay import DEFAULT_MODE, set_mode

BIG = 50 * 1000 * 1000
SMALL_REQUESTS = 200

CELL = r'''
import http.client, json, time, urllib.request
host, port, big, small, tunnel = {host!r}, {port}, {big}, {small}, {tunnel}
def fetch_big():
    if tunnel:
        conn = http.client.HTTPConnection("127.0.0.1", 3128, timeout=60)
        conn.set_tunnel(host, port)
        conn.request("GET", "/big")
        response = conn.getresponse()
    else:
        response = urllib.request.urlopen(f"http://{{host}}:{{port}}/big", timeout=60)
    got = 0
    while chunk := response.read(1 << 20):
        got += len(chunk)
    assert got == big, got
began = time.perf_counter(); fetch_big(); download = time.perf_counter() - began
began = time.perf_counter()
for _ in range(small):
    urllib.request.urlopen(f"http://{{host}}:{{port}}/small", timeout=10).read()
requests = time.perf_counter() - began
print("BENCH" + json.dumps({{"download": download, "small": requests}}))
'''


SERVER = r"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
payload = b"x" * int(sys.argv[1])
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = payload if self.path.endswith("/big") else b"small page"  # absolute form too (a relay passes it on)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, format, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
"""
"""The HTTP server, in a process of its own (as a real server is): in the host's it would share its interpreter lock
with the proxy."""


def _server() -> tuple[subprocess.Popen[bytes], int]:
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(BIG)], stdout=subprocess.PIPE)
    assert server.stdout is not None
    return server, int(server.stdout.readline())


def _resolve(host: str, port: int) -> list[str]:
    if host != "bench.test":
        raise OSError(f"unknown host {host}")
    return ["127.0.0.1"]


async def _run(kernel: Kernel, host: str, port: int, tunnel: bool) -> dict[str, float]:
    code = CELL.format(host=host, port=port, big=BIG, small=SMALL_REQUESTS, tunnel=tunnel)
    result = await kernel.execute(code, timeout=300)
    for line in result.text.splitlines():
        if line.startswith("BENCH"):
            return dict(json.loads(line.removeprefix("BENCH")))
    raise RuntimeError(f"the cell failed: {result.text[-2000:]}")


MODES = ("splice", "copy")
"""How the proxy moves a connection's bytes (`relay.set_mode`), each measured in every round (`python -m bench`
measures the default only)."""


async def traffic(folder: str, port: int, rounds: int, modes: tuple[str, ...] = (DEFAULT_MODE,)) -> dict[str, Any]:
    # the host's own network, as `workspace` had it: `workspace` now goes through the proxy like the listed profile
    direct_plan = {**BUILT_IN_PROFILES["workspace"].plan(Path(folder)), "network": True}
    proxied_plan = SandboxProfile(name="bench", network=("bench.test", "127.0.0.1")).plan(Path(folder))
    direct, proxied = Kernel(working_dir=folder, sandbox=direct_plan), Kernel(working_dir=folder, sandbox=proxied_plan)
    await asyncio.gather(direct.start(), proxied.start())
    keys = ["direct_download", "direct_small"]
    for mode in modes:
        keys += [f"{mode}_download", f"{mode}_small", f"{mode}_tunnel", f"{mode}_cpu"]
    samples: dict[str, list[float]] = {key: [] for key in keys}
    try:
        await _run(direct, "127.0.0.1", port, False)  # warm up both
        await _run(proxied, "bench.test", port, False)
        for index in range(rounds):
            measured = await _run(direct, "127.0.0.1", port, False)
            samples["direct_download"].append(measured["download"])
            samples["direct_small"].append(measured["small"])
            for mode in modes[index % len(modes):] + modes[:index % len(modes)]:  # alternate which goes first
                set_mode(mode)
                before = proxy().cpu_seconds()
                measured = await _run(proxied, "bench.test", port, False)
                samples[f"{mode}_cpu"].append(proxy().cpu_seconds() - before)
                samples[f"{mode}_download"].append(measured["download"])
                samples[f"{mode}_small"].append(measured["small"])
                measured = await _run(proxied, "bench.test", port, True)
                samples[f"{mode}_tunnel"].append(measured["download"])
    finally:
        set_mode(None)
        await asyncio.gather(direct.shutdown(), proxied.shutdown())
    medians = {key: statistics.median(values) for key, values in samples.items()}
    # the default mode's numbers under the names the report reads
    default = DEFAULT_MODE if DEFAULT_MODE in modes else modes[0]
    medians.update(proxy_download=medians[f"{default}_download"], proxy_small=medians[f"{default}_small"],
                   tunnel_download=medians[f"{default}_tunnel"], proxy_cpu=medians[f"{default}_cpu"])
    return medians


async def spawns(folder: str, count: int) -> tuple[float, float, float]:
    """Median forked spawn of a `workspace` kernel without / with its default limits, and with its limits on the
    host's network (as before `workspace` meant the public internet through the proxy)."""
    limited = BUILT_IN_PROFILES["workspace"]
    unlimited = limited.model_copy(update={"limits": Limits(memory=None, processes=None)})
    plans: dict[bool | None, dict[str, Any]] = {
        False: unlimited.plan(Path(folder)), True: limited.plan(Path(folder)),
        None: {**limited.plan(Path(folder)), "network": True},
    }
    zygote = KernelZygote()
    await zygote.start()
    samples: dict[bool | None, list[float]] = {False: [], True: [], None: []}
    try:
        for index in range(count + 1):
            for with_limits in (False, True, None):
                kernel = Kernel(working_dir=folder, launcher=zygote, sandbox=plans[with_limits])
                began = time.perf_counter()
                await kernel.start()
                elapsed = time.perf_counter() - began
                await kernel.shutdown(now=True)
                if index:  # the first pair warms up
                    samples[with_limits].append(elapsed)
    finally:
        await zygote.close()
    return statistics.median(samples[False]), statistics.median(samples[True]), statistics.median(samples[None])


async def measure(rounds: int, count: int, modes: tuple[str, ...] = (DEFAULT_MODE,)) -> dict[str, Any]:
    """Everything this benchmark measures (`python -m bench` runs it too), in seconds."""
    set_resolver(_resolve)
    server, port = _server()
    try:
        with tempfile.TemporaryDirectory() as folder:
            measured = await traffic(folder, port, rounds, modes)
            if count:
                measured["spawn_without_limits"], measured["spawn_with_limits"], measured["spawn_host_network"] = \
                    await spawns(folder, count)
    finally:
        server.kill()
        server.wait()
        set_resolver(None)
    return {**measured, "rounds": rounds, "spawns": count, "modes": list(modes)}


async def main(rounds: int, count: int, modes: tuple[str, ...]) -> None:
    if (problem := platform_problem()) is not None:
        sys.exit(f"no sandbox on this machine: {problem}")
    measured = await measure(rounds, count, modes)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"medians of {rounds} rounds, every mode measured in each round against direct")
    direct, small = measured["direct_download"], measured["direct_small"]
    print(f"direct: 50 MB in {direct * 1000:.0f} ms, {SMALL_REQUESTS} small requests (a connection each) in "
          f"{small * 1000:.0f} ms")
    for mode in modes:
        plain, tunnel, many = (measured[f"{mode}_{key}"] for key in ("download", "tunnel", "small"))
        print(f"proxy, {mode}{' (the default)' if mode == DEFAULT_MODE else ''}: 50 MB plain {plain / direct:.2f}x, "
              f"CONNECT {tunnel / direct:.2f}x (target <= 1.10); {SMALL_REQUESTS} small requests "
              f"{many / small:.2f}x (target <= 1.30), {(many - small) / SMALL_REQUESTS * 1e6:.0f} us more each; "
              f"the proxy's CPU {measured[f'{mode}_cpu'] * 1000:.0f} ms for one download and the requests")
    if not count:
        return
    free, limited = measured["spawn_without_limits"], measured["spawn_with_limits"]
    print(f"spawn, forked, workspace: {free * 1000:.1f} ms without limits, {limited * 1000:.1f} ms with its default "
          f"limits: {(limited - free) * 1000:+.1f} ms (target <= +5 ms)")
    shared = measured["spawn_host_network"]
    print(f"spawn, forked, workspace with its limits: {shared * 1000:.1f} ms on the host's network (before), "
          f"{limited * 1000:.1f} ms with a network namespace and the proxy (now): {(limited - shared) * 1000:+.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spawns", type=int, default=20, help="forked spawns per kind (0: none)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="how the proxy moves bytes, each measured: copy, splice, with :<KiB> held at most")
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.spawns, tuple(options.modes.split(","))))
