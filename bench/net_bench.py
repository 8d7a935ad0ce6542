"""What network by host and limits cost: traffic through the sandbox's proxy vs. direct, and spawn with limits.

    python bench/net_bench.py [--rounds 3] [--spawns 20] [--modes copy,splice] [--proxies thread,process] [--busy]
                              [--registrations 200]

A local HTTP server on 127.0.0.1 (a process of its own) serves 50 MB and a small page. Two confined kernels run
the same cell, in turns: one sharing the host's network (what `workspace` had before network on meant the public
internet only: it connects to 127.0.0.1 directly), one under a profile listing `bench.test` (a name the proxy
resolves to 127.0.0.1), whose traffic goes through the host's filtering proxy:
- a 50 MB download (plain HTTP through the proxy, and through a CONNECT tunnel as HTTPS would go);
- 200 small requests, each on a new connection (as urllib makes them).
Times are taken inside the cell. Each round measures direct, then every mode of the proxy's relay (`--modes`:
`splice` or the copy loop, `:<KiB>` the most one direction holds) with the proxy in each place (`--proxies`: in a
thread of the host's, as before issue 38, or in its own process, the default), in turns. The proxy's CPU (its
threads in the host, or its process) is reported per variant. `--busy`: a thread of the host runs Python all the
while (as a fan-out's agents do). Targets: 50 MB <= 1.10x direct, 200 small requests <= 1.30x.
Then spawn (forked by the zygote, as pooled and child kernels are) under `workspace` with its default limits
(memory, processes: a pids cgroup where the host can make one) against the same profile without limits.
Target: <= +5 ms. Then what a kernel's registration costs the host with the proxy in a thread and in its own process,
in turns, and what the proxy's process costs as it starts (`--registrations`).

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
import threading
import time
from pathlib import Path
from typing import Any

from freeact_sub.kernels.launcher import KernelZygote
from freeact_sub.kernels.local import Kernel
from freeact_sub.sandbox import BUILT_IN_PROFILES, SandboxProfile, platform_problem
from freeact_sub.sandbox.limits import Limits
from freeact_sub.sandbox.proxy import Proxy, in_process_proxy, set_resolver
from freeact_sub.sandbox.proxy_client import IN_PROCESS, ProxyProcess
from freeact_sub.sandbox.proxy_client import proxy as process_proxy
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


PROXIES = ("thread", "process")
"""Where the proxy runs: in a thread of the host's (`FREEACT_SUB_PROXY=in-process`, as before issue 38) or in a
process of its own (the default)."""


def _variant(mode: str, kind: str) -> str:
    return mode if kind == "process" else f"{mode}-thread"


def _spin(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(1000))


async def _start_proxied(folder: str, plan: dict[str, Any], kind: str) -> Kernel:
    """A kernel whose registration goes to the proxy `kind` (the variable is read as it registers)."""
    kernel = Kernel(working_dir=folder, sandbox=plan)
    before = os.environ.get("FREEACT_SUB_PROXY")
    os.environ["FREEACT_SUB_PROXY"] = IN_PROCESS if kind == "thread" else ""
    try:
        await kernel.start()
    finally:
        if before is None:
            os.environ.pop("FREEACT_SUB_PROXY", None)
        else:
            os.environ["FREEACT_SUB_PROXY"] = before
    return kernel


def _proxy_cpu(kind: str) -> float:
    return in_process_proxy().cpu_seconds() if kind == "thread" else process_proxy().cpu_seconds()


async def traffic(
    folder: str,
    port: int,
    rounds: int,
    modes: tuple[str, ...] = (DEFAULT_MODE,),
    kinds: tuple[str, ...] = ("process",),
    busy: bool = False,
) -> dict[str, Any]:
    # the host's own network, as `workspace` had it: `workspace` now goes through the proxy like the listed profile
    direct_plan = {**BUILT_IN_PROFILES["workspace"].plan(Path(folder)), "network": True}
    proxied_plan = SandboxProfile(name="bench", network=("bench.test", "127.0.0.1")).plan(Path(folder))
    direct = Kernel(working_dir=folder, sandbox=direct_plan)
    await direct.start()
    proxied = {kind: await _start_proxied(folder, proxied_plan, kind) for kind in kinds}
    variants = [(mode, kind) for mode in modes for kind in kinds]
    keys = ["direct_download", "direct_small"]
    for mode, kind in variants:
        name = _variant(mode, kind)
        keys += [f"{name}_download", f"{name}_small", f"{name}_tunnel", f"{name}_cpu"]
    samples: dict[str, list[float]] = {key: [] for key in keys}
    stop = threading.Event()
    spinner = threading.Thread(target=_spin, args=(stop,), daemon=True)
    if busy:
        spinner.start()
    try:
        await _run(direct, "127.0.0.1", port, False)  # warm up every kernel
        for kernel in proxied.values():
            await _run(kernel, "bench.test", port, False)
        for index in range(rounds):
            measured = await _run(direct, "127.0.0.1", port, False)
            samples["direct_download"].append(measured["download"])
            samples["direct_small"].append(measured["small"])
            turn = index % len(variants)
            for mode, kind in variants[turn:] + variants[:turn]:  # alternate which goes first
                name = _variant(mode, kind)
                set_mode(mode)
                before = _proxy_cpu(kind)
                measured = await _run(proxied[kind], "bench.test", port, False)
                samples[f"{name}_cpu"].append(_proxy_cpu(kind) - before)
                samples[f"{name}_download"].append(measured["download"])
                samples[f"{name}_small"].append(measured["small"])
                measured = await _run(proxied[kind], "bench.test", port, True)
                samples[f"{name}_tunnel"].append(measured["download"])
    finally:
        stop.set()
        set_mode(None)
        await asyncio.gather(direct.shutdown(), *(kernel.shutdown() for kernel in proxied.values()))
    medians = {key: statistics.median(values) for key, values in samples.items()}
    # the default mode's numbers under the names the report reads
    kind = "process" if "process" in kinds else kinds[0]
    default = _variant(DEFAULT_MODE if DEFAULT_MODE in modes else modes[0], kind)
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


def _process_cpu_and_rss(pid: int) -> tuple[float, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    rss = next(int(line.split()[1]) * 1024 for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:"))
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), rss


def registrations(count: int) -> dict[str, float]:
    """What registering a kernel costs the host (wall and this process's CPU, register + arm + close, medians; the
    proxy already running: another registration holds it), in a thread of the host's and in the proxy's own process,
    in turns; and the proxy process's start (the first registration's wall time, the process's CPU and memory)."""
    own = ProxyProcess()
    samples: dict[str, list[float]] = {"thread_wall": [], "thread_cpu": [], "process_wall": [], "process_cpu": []}
    starts: dict[str, list[float]] = {"start_wall": [], "ready_wall": [], "start_cpu": [], "start_rss": []}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(max(3, count // 10)):  # the process's start: first registration, then its CPU and memory
            began = time.perf_counter()
            first = own.register(os.path.join(folder, "first.sock"), ("bench.test",), "bench")
            starts["start_wall"].append(time.perf_counter() - began)  # what the first kernel's start waits for
            assert own.wait_started() and own.pid is not None
            starts["ready_wall"].append(time.perf_counter() - began)
            cpu, rss = _process_cpu_and_rss(own.pid)
            starts["start_cpu"].append(cpu)
            starts["start_rss"].append(rss)
            first.close()
        holders = {"thread": in_process_proxy().register(os.path.join(folder, "t.sock"), ("bench.test",), "bench"),
                   "process": own.register(os.path.join(folder, "p.sock"), ("bench.test",), "bench")}
        proxies: dict[str, Proxy | ProxyProcess] = {"thread": in_process_proxy(), "process": own}
        try:
            for index in range(count):
                for kind in ("thread", "process")[index % 2:] + ("thread", "process")[:index % 2]:
                    path = os.path.join(folder, f"{kind}-{index}.sock")
                    cpu, began = time.process_time(), time.perf_counter()
                    registration = proxies[kind].register(path, ("bench.test",), "bench")
                    registration.arm()
                    registration.close()
                    samples[f"{kind}_wall"].append(time.perf_counter() - began)
                    samples[f"{kind}_cpu"].append(time.process_time() - cpu)
        finally:
            for holder in holders.values():
                holder.close()
    return {key: statistics.median(values) for key, values in {**samples, **starts}.items()}


async def measure(
    rounds: int,
    count: int,
    modes: tuple[str, ...] = (DEFAULT_MODE,),
    kinds: tuple[str, ...] = ("process",),
    busy: bool = False,
) -> dict[str, Any]:
    """Everything this benchmark measures (`python -m bench` runs it too), in seconds."""
    set_resolver(_resolve)
    server, port = _server()
    try:
        with tempfile.TemporaryDirectory() as folder:
            measured = await traffic(folder, port, rounds, modes, kinds, busy)
            if count:
                measured["spawn_without_limits"], measured["spawn_with_limits"], measured["spawn_host_network"] = \
                    await spawns(folder, count)
    finally:
        server.kill()
        server.wait()
        set_resolver(None)
    return {**measured, "rounds": rounds, "spawns": count, "modes": list(modes), "proxies": list(kinds)}


async def main(
    rounds: int, count: int, modes: tuple[str, ...], kinds: tuple[str, ...], busy: bool, registrations_count: int
) -> None:
    if (problem := platform_problem()) is not None:
        sys.exit(f"no sandbox on this machine: {problem}")
    measured = await measure(rounds, count, modes, kinds, busy)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"medians of {rounds} rounds, every variant measured in each round against direct"
          + ("; a thread of the host runs Python all the while" if busy else ""))
    direct, small = measured["direct_download"], measured["direct_small"]
    print(f"direct: 50 MB in {direct * 1000:.0f} ms, {SMALL_REQUESTS} small requests (a connection each) in "
          f"{small * 1000:.0f} ms")
    for mode in modes:
        for kind in kinds:
            name = _variant(mode, kind)
            plain, tunnel, many = (measured[f"{name}_{key}"] for key in ("download", "tunnel", "small"))
            where = "its own process" if kind == "process" else "a thread of the host"
            print(f"proxy in {where}, {mode}{' (the default)' if mode == DEFAULT_MODE else ''}: 50 MB plain "
                  f"{plain / direct:.2f}x, CONNECT {tunnel / direct:.2f}x (target <= 1.10); {SMALL_REQUESTS} small "
                  f"requests {many / small:.2f}x (target <= 1.30), {(many - small) / SMALL_REQUESTS * 1e6:.0f} us more "
                  f"each; the proxy's CPU {measured[f'{name}_cpu'] * 1000:.0f} ms for one download and the requests")
    if registrations_count:
        found = registrations(registrations_count)
        print(f"a kernel's registration (register, arm, close; {registrations_count} of each, in turns), the host's "
              f"wall / CPU: in a thread {found['thread_wall'] * 1e6:.0f} / {found['thread_cpu'] * 1e6:.0f} us, with "
              f"the proxy's process {found['process_wall'] * 1e6:.0f} / {found['process_cpu'] * 1e6:.0f} us")
        print(f"the proxy's process starting: the first registration takes {found['start_wall'] * 1000:.1f} ms, "
              f"the process is ready {found['ready_wall'] * 1000:.0f} ms after it, having used "
              f"{found['start_cpu'] * 1000:.0f} ms of CPU; its memory {found['start_rss'] / 2**20:.1f} MiB (RSS)")
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
    parser.add_argument("--proxies", default=",".join(PROXIES),
                        help="where the proxy runs, each measured: thread (of the host's), process (its own)")
    parser.add_argument("--busy", action="store_true", help="a thread of the host runs Python meanwhile")
    parser.add_argument("--registrations", type=int, default=200,
                        help="registrations of each kind measured (0: none), and a tenth as many process starts")
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.spawns, tuple(options.modes.split(",")),
                     tuple(options.proxies.split(",")), options.busy, options.registrations))
