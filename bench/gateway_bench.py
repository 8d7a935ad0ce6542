"""Kernels on a Jupyter Kernel Gateway, measured in one run against one local gateway.

    python bench/gateway_bench.py [--rounds 200] [--spawns 5]

Starts `jupyter-kernelgateway` on 127.0.0.1 (a free port, a token), then prints:
(1) spawn latency of a child whose kernel is on the gateway, from the approval of the parent's
    `task` call to the child's first model request, with the kernel pool (warm) and without it;
    baseline: a plain remote kernel start (`GatewayKernel.start()`).
(2) the median round trip of a trivial cell (`x = 1`, until its iopub `idle`) through our
    `GatewayKernel` vs. a minimal raw websocket client sending the same `execute_request` to
    another kernel on the same gateway, measured alternately. Target: ratio <= 1.25; and <= 10 ms
    on loopback. The raw client is measured twice: as a plain websocket, and acknowledging each
    read at once (`TCP_QUICKACK`, as ours does); then a second gateway whose websockets send
    with `TCP_NODELAY` (the gateway-side fix, a config file the README shows) against the plain
    raw client. The stall of a plain client is Nagle's algorithm on the gateway's side meeting
    Linux's delayed ACK on ours.
(3) how many of 10,000 lines printed with `flush=True` arrive through our layer (target: all),
    and, for comparison, through the raw client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.subagent_bench import SpawnScript, timed_spawn
from freeact_sub import Agent, AgentConfig
from freeact_sub.config.agent_config import KernelGatewayConfig
from freeact_sub.kernels._gateway_client import QuickAckConnection
from freeact_sub.kernels.gateway import GatewayKernel
from tests.gateway_server import TOKEN_ENV, GatewayServer, kernel_gateway

LINES = 10_000


class RawClient:
    """The baseline: one websocket, a hand-made `execute_request`, read until its `idle`."""

    def __init__(self, server: GatewayServer, quickack: bool = False) -> None:
        self.server = server
        self.session = uuid.uuid4().hex
        self.quickack = quickack

    async def start(self) -> None:
        async with httpx.AsyncClient(headers=self.server.headers, timeout=120) as http:
            response = await http.post(f"{self.server.url}/api/kernels", json={"name": "python3"})
        self.kernel_id = response.json()["id"]
        url = self.server.url.replace("http", "ws", 1) + f"/api/kernels/{self.kernel_id}/channels"
        self.ws: ClientConnection = await connect(url, additional_headers=self.server.headers, max_size=None,
                                                  compression=None,
                                                  create_connection=QuickAckConnection if self.quickack else None)
        await self.execute("pass")  # the kernel answers

    async def execute(self, code: str) -> str:
        msg_id = uuid.uuid4().hex
        message = {
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "bench", "session": self.session,
                       "date": "", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True},
        }
        await self.ws.send(json.dumps(message))
        parts = []
        while True:
            reply: dict[str, Any] = json.loads(await self.ws.recv())
            if reply["parent_header"].get("msg_id") != msg_id:
                continue
            if reply["msg_type"] == "stream":
                parts.append(reply["content"]["text"])
            elif reply["msg_type"] == "status" and reply["content"]["execution_state"] == "idle":
                return "".join(parts)

    async def shutdown(self) -> None:
        await self.ws.close()
        async with httpx.AsyncClient(headers=self.server.headers, timeout=30) as http:
            await http.delete(f"{self.server.url}/api/kernels/{self.kernel_id}")


def gateway_config(server: GatewayServer) -> KernelGatewayConfig:
    return KernelGatewayConfig(url=server.url, token_env=TOKEN_ENV)


async def remote_starts(server: GatewayServer, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        kernel = GatewayKernel(gateway_config(server))
        await kernel.start()
        samples.append(time.perf_counter() - began)
        await kernel.shutdown()
    return samples


async def spawn_latencies(server: GatewayServer, spawns: int, pool_size: int) -> list[float]:
    samples = []
    with tempfile.TemporaryDirectory() as work:
        from pydantic_ai.models.function import FunctionModel

        script = SpawnScript(children=1)
        config = AgentConfig(model=FunctionModel(stream_function=script), working_dir=work, save_sessions=False,
                             kernel_pool_size=pool_size, kernel_gateway=gateway_config(server))
        async with Agent(config) as agent:
            for _ in range(spawns):
                while agent.tree.pool.ready < pool_size:  # noqa: ASYNC110 - polling the pool's counter
                    await asyncio.sleep(0.05)
                samples.append(await timed_spawn(agent, script))
    return samples


async def round_trips(raw: RawClient, ours: GatewayKernel, rounds: int, quick: RawClient) -> tuple[float, float, float]:
    """Medians of raw, ours and the quick-ack raw client, measured in turn."""
    clients = {"raw": raw.execute, "ours": ours.execute, "quick": quick.execute}
    for _ in range(10):  # warm up
        for execute in clients.values():
            await execute("x = 1")
    samples: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(rounds):
        for name, execute in clients.items():
            began = time.perf_counter()
            await execute("x = 1")
            samples[name].append(time.perf_counter() - began)
    return statistics.median(samples["raw"]), statistics.median(samples["ours"]), statistics.median(samples["quick"])


NODELAY_CONFIG = """\
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection


class NoDelayConnection(ZMQChannelsWebsocketConnection):
    def connect(self):
        self.websocket_handler.set_nodelay(True)
        return super().connect()


c.KernelGatewayApp.kernel_websocket_connection_class = NoDelayConnection
"""


async def nodelay_gateway_round_trip(rounds: int) -> float:
    """The plain raw client's median round trip on a gateway whose websockets send with TCP_NODELAY."""
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder, "nodelay_config.py")
        config.write_text(NODELAY_CONFIG)  # noqa: ASYNC240
        with kernel_gateway(Path(folder), f"--config={config}") as server:
            os.environ[TOKEN_ENV] = server.token
            raw = RawClient(server)
            await raw.start()
            try:
                for _ in range(10):
                    await raw.execute("x = 1")
                samples = []
                for _ in range(rounds):
                    began = time.perf_counter()
                    await raw.execute("x = 1")
                    samples.append(time.perf_counter() - began)
                return statistics.median(samples)
            finally:
                await raw.shutdown()


def in_order(text: str) -> int:
    """How many of the lines `0` … `9999` arrived, in order (a missing or garbled line is reported)."""
    lines = text.splitlines()
    wrong = [(i, line) for i, line in enumerate(lines) if line != str(i)]
    if wrong:
        first = wrong[0][0]
        print(f"  {len(lines)} lines; the first out of place: {wrong[:3]}; around it: {lines[first - 2:first + 3]}",
              file=sys.stderr)
    return len(lines) - len(wrong) if not wrong else wrong[0][0]


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms"


async def main(server: GatewayServer, rounds: int, spawns: int) -> None:
    os.environ[TOKEN_ENV] = server.token
    starts = await remote_starts(server, spawns)
    pooled = await spawn_latencies(server, spawns, pool_size=2)
    unpooled = await spawn_latencies(server, spawns, pool_size=0)

    raw, ours, quick = RawClient(server), GatewayKernel(gateway_config(server)), RawClient(server, quickack=True)
    await raw.start()
    await ours.start()
    await quick.start()
    try:
        rt_raw, rt_ours, rt_quick = await round_trips(raw, ours, rounds, quick)
        flood = f"for i in range({LINES}):\n    print(i, flush=True)"
        began = time.perf_counter()
        ours_lines = in_order((await ours.execute(flood)).text)
        ours_time = time.perf_counter() - began
        began = time.perf_counter()
        raw_lines = in_order(await raw.execute(flood))
        raw_time = time.perf_counter() - began
    finally:
        await raw.shutdown()
        await ours.shutdown()
        await quick.shutdown()
    rt_nodelay = await nodelay_gateway_round_trip(rounds)

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, jupyter-kernel-gateway on 127.0.0.1")
    print(f"remote kernel start (GatewayKernel.start, median of {spawns}): {ms(starts)}")
    print(f"child spawn latency, pool of 2 warm: {ms(pooled)}; no pool: {ms(unpooled)} "
          f"(ratio pooled/unpooled {statistics.median(pooled) / statistics.median(unpooled):.2f})")
    print(f"round trip (median of {rounds}): raw websocket {rt_raw * 1000:.2f} ms, ours {rt_ours * 1000:.2f} ms, "
          f"ratio {rt_ours / rt_raw:.2f} (target <= 1.25; ours <= 10 ms on loopback)")
    print(f"    raw websocket acknowledging each read at once (TCP_QUICKACK, as ours does): {rt_quick * 1000:.2f} ms, "
          f"ours / it {rt_ours / rt_quick:.2f}; plain raw websocket on a gateway with TCP_NODELAY on its websockets: "
          f"{rt_nodelay * 1000:.2f} ms")
    print(f"flushed lines: ours {ours_lines} of {LINES} in order ({ours_time:.1f} s), "
          f"raw client {raw_lines} of {LINES} ({raw_time:.1f} s) (target {LINES} of {LINES})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--spawns", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, kernel_gateway(Path(folder)) as gateway:
        asyncio.run(main(gateway, args.rounds, args.spawns))
