"""The sandbox's proxy alone, against direct and against the floor of any relay: no kernel, every part a process.

    python -m bench.proxy_alone [--rounds 5] [--requests 300] [--modes splice,copy] [--baseline DIR] [--busy]

A client (urllib, as a cell's code would be) makes `--requests` small requests, each on a new connection, then
downloads 50 MB from an HTTP server of its own process, on 127.0.0.1. It goes:

- `direct`: to the server;
- `floor`: through `bench/relay_floor.c` (compiled here if a C compiler is there), a relay with no parsing, no checks
  and no Python: what the extra hop alone costs on this machine (the second connection, two more passes through
  loopback, the wake-ups);
- `<mode>`: through this checkout's proxy, in a process of its own serving a listening socket handed to it as a
  kernel's is (`--modes`: `splice` or `copy`, `:<KiB>` the most a direction holds);
- `base-<mode>` with `--baseline DIR`: the same with the proxy of the code checked out in DIR (`git archive`).

Every round runs each in turns (the order rotates). Printed per variant, medians: a small request's round trip and
the download against direct, the relay's CPU per request and per 50 MB, and the CPU of all three processes (client,
server, relay): on 2 busy cores the download cannot be faster than that total allows. `--busy`: Python runs all the
time beside the proxy, in a thread of its process (`+lock`: as the host's own work does, sharing the interpreter
lock with the proxy's thread) and, in turns, in a process of its own (`+apart`: the same competition for the
cores, no lock shared: what a proxy in a process of its own would meet); `--switch-intervals 0,0.5`: the proxy's
process with Python's default switch interval (5 ms) and with 0.5 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.net_bench import BIG, SERVER

ROOT = Path(__file__).resolve().parent.parent

SERVE = r"""
import os, socket, sys, tempfile, threading
from freeact_sub.sandbox.proxy import Proxy, set_resolver
from freeact_sub.sandbox.relay import set_mode
set_mode(sys.argv[1])
set_resolver(lambda host, port: ["127.0.0.1"] if host == "bench.test" else [])
proxy = Proxy()
folder = tempfile.mkdtemp()
registration = proxy.register(os.path.join(folder, "proxy.sock"), ("bench.test", "127.0.0.1"), "bench")
registration.arm()
with socket.create_server(("127.0.0.1", 0)) as listener, socket.socket(socket.AF_UNIX) as handing:
    handing.connect(registration.path)
    socket.send_fds(handing, [b"L"], [listener.fileno()])
    handing.recv(1)
    port = listener.getsockname()[1]
if float(sys.argv[3]):
    sys.setswitchinterval(float(sys.argv[3]))
SPIN = "while True: sum(range(1000))"
spinner = None
if sys.argv[2] == "lock":
    threading.Thread(target=lambda: exec(SPIN), daemon=True).start()
elif sys.argv[2] == "apart":
    import subprocess
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
print(port, flush=True)
try:
    for line in sys.stdin:
        print(proxy.cpu_seconds(), flush=True)
finally:
    if spinner is not None:
        spinner.kill()
        spinner.wait()
    registration.close()
    os.rmdir(folder)
"""
"""A proxy in a process of its own (run with the checkout's `PYTHONPATH`): prints the port it serves, then its
threads' CPU seconds for each line read; ends at the end of its input."""

CLIENT = r"""
import json, sys, time, urllib.request
proxy_port, host, port, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
opener = urllib.request.build_opener(urllib.request.ProxyHandler(
    {"http": f"http://127.0.0.1:{proxy_port}"} if proxy_port else {}))
if count:
    times = []
    for _ in range(count):
        began = time.perf_counter()
        opener.open(f"http://{host}:{port}/small", timeout=10).read()
        times.append(time.perf_counter() - began)
    took = sorted(times)[count // 2]
else:
    began = time.perf_counter()
    response = opener.open(f"http://{host}:{port}/big", timeout=60)
    while response.read(1 << 20):
        pass
    took = time.perf_counter() - began
print(json.dumps({"took": took, "cpu": time.process_time()}))
"""
"""`count` small requests (the median's round trip), or with 0 the 50 MB download; and the client's own CPU."""


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class _Relay:
    """A relay in a process of its own: its port, and how to read its CPU."""

    name: str
    process: subprocess.Popen[str] | None
    port: int
    own_cpu: bool
    """Whether the process reports its proxy's CPU itself (else: the whole process's, from /proc)."""

    def cpu(self) -> float:
        if self.process is None:
            return 0.0
        if not self.own_cpu:
            return _cpu_of(self.process.pid)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("cpu\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def stop(self) -> None:
        if self.process is None:
            return
        if self.own_cpu and self.process.stdin is not None:
            self.process.stdin.close()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
        else:
            self.process.kill()
        self.process.wait()


def _start(name: str, command: list[str], env: dict[str, str] | None = None, own_cpu: bool = False) -> _Relay:
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.strip().isdigit():
        process.kill()
        process.wait()
        raise RuntimeError(f"{name} did not start")
    return _Relay(name, process, int(line), own_cpu)


def _floor(folder: str, upstream: int) -> _Relay | None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    binary = os.path.join(folder, "relay_floor")
    subprocess.run([compiler, "-O2", "-o", binary, str(ROOT / "bench" / "relay_floor.c")], check=True)
    return _start("floor", [binary, str(upstream)])


def _proxy(name: str, checkout: Path, mode: str, busy: str, switch: float) -> _Relay:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    return _start(name, [sys.executable, "-c", SERVE, mode, busy, str(switch)], env, own_cpu=True)


def measure(
    rounds: int,
    requests: int,
    modes: tuple[str, ...],
    baseline: Path | None = None,
    busy: bool = False,
    switch: tuple[float, ...] = (0.0,),
) -> dict[str, dict[str, float]]:
    """Medians per variant (`direct`, `floor`, each mode, `base-<mode>`): `small` and `big` (seconds), `relay_small`
    and `relay_big` (the relay's CPU seconds per request, per download), `all_big` (the CPU seconds of client,
    server and relay for the download)."""
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(BIG)], stdout=subprocess.PIPE)
    assert server.stdout is not None
    port = int(server.stdout.readline())
    relays: list[_Relay] = [_Relay("direct", None, 0, False)]
    samples: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        try:
            floor = _floor(folder, port)
            if floor is not None:
                relays.append(floor)
            for mode in modes:
                for interval in switch:
                    for spinning in ("lock", "apart") if busy else ("calm",):
                        named = (
                            mode + (f"@{interval * 1000:g}ms" if interval else "") + (f"+{spinning}" if busy else "")
                        )
                        relays.append(_proxy(named, ROOT, mode, spinning, interval))
                        if baseline is not None:
                            relays.append(_proxy(f"base-{named}", baseline, mode, spinning, interval))

            def client(relay: _Relay, count: int) -> tuple[float, float, float]:
                """What the client measured, the relay's CPU and the CPU of all three for it."""
                host = "127.0.0.1" if relay.process is None else "bench.test"
                relay_before, server_before = relay.cpu(), _cpu_of(server.pid)
                done = subprocess.run(
                    [sys.executable, "-c", CLIENT, str(relay.port), host, str(port), str(count)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                found = json.loads(done.stdout)
                relay_cpu = relay.cpu() - relay_before
                return found["took"], relay_cpu, found["cpu"] + (_cpu_of(server.pid) - server_before) + relay_cpu

            for relay in relays:  # warm up
                client(relay, 20)
            for index in range(rounds):
                for relay in relays[index % len(relays) :] + relays[: index % len(relays)]:
                    small, relay_small, _ = client(relay, requests)
                    big, relay_big, all_big = client(relay, 0)
                    kept = samples.setdefault(relay.name, {})
                    for key, value in (
                        ("small", small),
                        ("relay_small", relay_small / requests),
                        ("big", big),
                        ("relay_big", relay_big),
                        ("all_big", all_big),
                    ):
                        kept.setdefault(key, []).append(value)
        finally:
            for relay in relays:
                relay.stop()
            server.kill()
            server.wait()
    return {name: {key: statistics.median(values) for key, values in kept.items()} for name, kept in samples.items()}


def report(found: dict[str, dict[str, float]], rounds: int, requests: int, busy: bool) -> None:
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; medians of "
        f"{rounds} rounds, each variant in turns; {requests} small requests (a connection each), then 50 MB"
        + ("; Python runs beside the proxy all the while (+lock: in its process, +apart: in another)" if busy else "")
    )
    direct = found["direct"]
    for name, row in found.items():
        print(
            f"{name:>14}: small request {row['small'] * 1e6:5.0f} us ({row['small'] / direct['small']:.2f}x)"
            f"  50 MB {row['big'] * 1000:4.0f} ms ({row['big'] / direct['big']:.2f}x)"
            f"  relay CPU {row['relay_small'] * 1e6:4.0f} us a request, {row['relay_big'] * 1000:3.0f} ms for 50 MB"
            f"  CPU of all for 50 MB {row['all_big'] * 1000:4.0f} ms ({row['all_big'] / direct['all_big']:.2f}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--modes", default="splice")
    parser.add_argument("--baseline", type=Path, help="a checkout of other code, its proxy measured in turns")
    parser.add_argument("--busy", action="store_true", help="Python runs beside the proxy meanwhile")
    parser.add_argument(
        "--switch-intervals",
        default="0",
        help="the proxy's process's `sys.setswitchinterval`, in ms, each measured (0: Python's 5 ms)",
    )
    options = parser.parse_args()
    began = time.perf_counter()
    intervals = tuple(float(ms) / 1000 for ms in options.switch_intervals.split(","))
    found = measure(
        options.rounds, options.requests, tuple(options.modes.split(",")), options.baseline, options.busy, intervals
    )
    report(found, options.rounds, options.requests, options.busy)
    print(f"({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
