"""Network on (`workspace`) is the public internet: not the host's loopback, link-local or private ranges.

A TCP server of the host's on 127.0.0.1 (standing in for a person's unauthenticated development server) counts
who reaches it. A kernel under `workspace` tries it directly, through its proxy by address and by a name that
resolves to it, and tries the cloud metadata address: all refused, nothing reached the server. A kernel whose
profile lists `*` and `127.0.0.1` reaches it through the proxy. Names resolve through the test's resolver.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from freeact_sub.kernels.local import Kernel
from freeact_sub.sandbox import BUILT_IN_PROFILES, SandboxProfile, platform_problem
from freeact_sub.sandbox.proxy import set_resolver

pytestmark = pytest.mark.skipif(platform_problem() is not None, reason=f"no sandbox here: {platform_problem()}")

PROBE = r"""
import json, os, socket, urllib.request
for name in ("NO_PROXY", "no_proxy"):  # the probe asks the proxy for 127.0.0.1 too
    os.environ.pop(name, None)
port = {port}
found = {{}}
def attempt(name, action):
    try:
        found[name] = action()
    except Exception as exc:
        found[name] = "refused: " + type(exc).__name__
def direct():
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        return s.recv(100).decode()
proxied = urllib.request.build_opener(urllib.request.ProxyHandler({{"http": "http://127.0.0.1:3128"}}))
def fetch(url):  # through the proxy even for 127.0.0.1 (which NO_PROXY keeps the kernel's own)
    return lambda: proxied.open(url, timeout=5).read().decode()
attempt("direct", direct)
attempt("proxy_address", fetch(f"http://127.0.0.1:{{port}}/"))
attempt("proxy_name", fetch(f"http://dev.test:{{port}}/"))
attempt("metadata", fetch("http://169.254.169.254/latest/meta-data/"))
print("PROBE" + json.dumps(found))
"""


@pytest.fixture
def host_server() -> Iterator[tuple[int, list[str]]]:
    """A TCP server on the host's loopback that answers `SERVED` (an HTTP reply) and notes each connection."""
    reached: list[str] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, peer = listener.accept()
            except TimeoutError:
                continue
            reached.append(str(peer))
            with connection:
                connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\nSERVED")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    set_resolver(lambda host, port: ["127.0.0.1"] if host == "dev.test" else ["169.254.169.254"])
    try:
        yield listener.getsockname()[1], reached
    finally:
        set_resolver(None)
        stop.set()
        thread.join(5)
        listener.close()


async def _probe(profile: SandboxProfile, folder: Path, port: int) -> dict[str, str]:
    async with Kernel(working_dir=folder, sandbox=profile.plan(folder)) as kernel:
        result = await kernel.execute(PROBE.format(port=port), timeout=60)
    line = next((line for line in result.text.splitlines() if line.startswith("PROBE")), None)
    assert line is not None, result.text
    return dict(json.loads(line.removeprefix("PROBE")))


async def test_network_on_reaches_neither_the_hosts_loopback_nor_metadata(host_server, tmp_path: Path) -> None:
    port, reached = host_server
    found = await _probe(BUILT_IN_PROFILES["workspace"], tmp_path, port)
    assert all(value.startswith("refused") for value in found.values()), found
    await asyncio.sleep(0.3)
    assert reached == [], "a kernel under `workspace` reached the host's loopback"


async def test_a_profile_that_lists_loopback_reaches_it_through_the_proxy(host_server, tmp_path: Path) -> None:
    port, reached = host_server
    found = await _probe(SandboxProfile(name="dev", network=("*", "127.0.0.1")), tmp_path, port)
    assert found["proxy_address"] == found["proxy_name"] == "SERVED"
    assert found["direct"].startswith("refused") and found["metadata"].startswith("refused")
    assert len(reached) == 2
