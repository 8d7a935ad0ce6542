"""The proxy under load from one kernel: idle connections cost the host no thread, a reader that does not read
costs it no memory, and an end of stream one way is passed on while the other way goes on.

One kernel (launched) under a profile listing the test's hosts, all on the host's 127.0.0.1: `hold.test` (a
listening socket nobody accepts from: connections to it stay idle), `stream.test` (sends a known pattern as fast as
it is taken, counting what it sent) and `count.test` (reads to the end of the stream, then answers how much came).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from freeact_sub.kernels.local import Kernel
from freeact_sub.sandbox import SandboxProfile, platform_problem
from freeact_sub.sandbox.proxy import Proxy, set_resolver
from freeact_sub.sandbox.relay import Relay, set_mode

pytestmark = [
    pytest.mark.skipif(platform_problem() is not None, reason=f"no sandbox here: {platform_problem()}"),
    pytest.mark.asyncio(loop_scope="module"),
]

BLOCK = bytes(range(256)) * 256
"""What `stream.test` sends, again and again (64 KiB: byte n of the stream is n % 256)."""

OPEN_IDLE = r"""
import socket
held = []
for _ in range({tunnels}):  # tunnels to a host that never answers: idle both ways
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(b"CONNECT hold.test:{port} HTTP/1.1\r\nHost: hold.test\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head
    held.append(s)
for _ in range({bare}):  # connections that never send their request
    held.append(socket.create_connection(("127.0.0.1", 3128), timeout=10))
print("OPEN", len(held))
"""

CLOSE_IDLE = "for s in held:\n    s.close()\nheld.clear()\nprint('CLOSED')"

OPEN_STREAM = r"""
import socket
stream = socket.create_connection(("127.0.0.1", 3128), timeout=30)
stream.sendall(b"CONNECT stream.test:{port} HTTP/1.1\r\nHost: stream.test\r\n\r\ngo\n")
head = b""
while b"\r\n\r\n" not in head:
    head += stream.recv(1)
print("STREAMING", head.split(b"\r\n")[0].decode())
"""

READ_STREAM = r"""
block = bytes(range(256)) * 256
got = bytearray()
while len(got) < {size}:
    got += stream.recv(min(1 << 20, {size} - len(got)))
print("INTACT" if got == block * ({size} // len(block)) else "CORRUPT")
stream.close()
"""

HALF_CLOSE = r"""
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
s.sendall(b"CONNECT count.test:{port} HTTP/1.1\r\nHost: count.test\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
s.sendall(b"x" * 300000)
s.shutdown(socket.SHUT_WR)  # the server answers only once it saw the end
reply = b""
while chunk := s.recv(4096):
    reply += chunk
print("REPLY", reply.decode())
"""


class Servers:
    """The three hosts; `close()` ends them and every connection they hold."""

    def __init__(self) -> None:
        self.hold = socket.create_server(("127.0.0.1", 0), backlog=512)
        self.stream = socket.create_server(("127.0.0.1", 0))
        self.count = socket.create_server(("127.0.0.1", 0))
        self.sent = 0
        self._connections: list[socket.socket] = []
        self._threads = [
            threading.Thread(target=self._serve, args=(server, handler), daemon=True)
            for server, handler in ((self.stream, self._send), (self.count, self._count))
        ]
        for thread in self._threads:
            thread.start()

    def port(self, server: socket.socket) -> int:
        return int(server.getsockname()[1])

    def _serve(self, server: socket.socket, handler: object) -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            self._connections.append(connection)
            assert callable(handler)
            threading.Thread(target=handler, args=(connection,), daemon=True).start()

    def _send(self, connection: socket.socket) -> None:
        with connection:
            connection.recv(3)
            try:
                while True:
                    connection.sendall(BLOCK)
                    self.sent += len(BLOCK)
            except OSError:
                pass

    def _count(self, connection: socket.socket) -> None:
        with connection:
            total = 0
            while chunk := connection.recv(65536):
                total += len(chunk)
            connection.sendall(f"got {total}".encode())

    def close(self) -> None:
        for sock in (self.hold, self.stream, self.count, *self._connections):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(5)


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    lab = Servers()
    set_resolver(lambda host, port: ["127.0.0.1"] if host.endswith(".test") else [])
    try:
        yield lab
    finally:
        set_resolver(None)
        lab.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kernel(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Kernel]:
    folder = tmp_path_factory.mktemp("load")
    profile = SandboxProfile(name="load", network=("hold.test", "stream.test", "count.test", "127.0.0.1"))
    async with Kernel(working_dir=folder, sandbox=profile.plan(Path(folder))) as started:
        yield started


async def _run(kernel: Kernel, code: str) -> str:
    result = await kernel.execute(code, timeout=60)
    return str(result.text)


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:  # closed meanwhile
            pass
    return count


def _rss() -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


async def _until(condition: object, seconds: float) -> bool:
    assert callable(condition)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.05)
    return bool(condition())


async def test_idle_connections_cost_the_host_no_thread(kernel: Kernel, servers: Servers) -> None:
    port = servers.port(servers.hold)
    # one connection first: the proxy's loop and a lookup thread exist before counting
    assert "OPEN 1" in await _run(kernel, OPEN_IDLE.format(tunnels=1, bare=0, port=port))
    assert "CLOSED" in await _run(kernel, CLOSE_IDLE)
    threads, sockets = _threads(), _sockets()
    assert "OPEN 200" in await _run(kernel, OPEN_IDLE.format(tunnels=100, bare=100, port=port))
    # the host holds them: two sockets per tunnel, one per connection still to send its request
    assert await _until(lambda: _sockets() - sockets >= 300, 10), _sockets() - sockets
    grown = _threads() - threads
    assert grown <= 4, f"200 idle connections of one kernel cost the host {grown} threads"
    assert "CLOSED" in await _run(kernel, CLOSE_IDLE)
    # the tunnels wait for the host's end of the stream after the kernel's (a half-close): the host goes away
    servers.hold.close()
    assert await _until(lambda: _sockets() - sockets <= 0, 10), "the proxy kept the ended connections' sockets"


@pytest.mark.parametrize("mode", ["copy", "splice"])
async def test_a_reader_that_does_not_read_holds_the_sender_back(kernel: Kernel, servers: Servers, mode: str) -> None:
    set_mode(mode)
    try:
        rss, servers.sent = _rss(), 0
        assert "STREAMING HTTP/1.1 200" in await _run(kernel, OPEN_STREAM.format(port=servers.port(servers.stream)))
        last, still = -1, time.monotonic()
        began = still
        while time.monotonic() - still < 0.6 and time.monotonic() - began < 20:  # until the sender stops
            await asyncio.sleep(0.1)
            if servers.sent != last:
                last, still = servers.sent, time.monotonic()
        held, grown = servers.sent, _rss() - rss
        # the socket buffers on the way (Linux may grow a receive buffer to tcp_rmem's 32 MiB here) and at most one
        # chunk in the proxy: far from what an unbounded relay takes in (all it is sent, at memory speed)
        assert held < 64 << 20, f"{held >> 20} MiB left the sender for a reader that read nothing"
        assert grown < 16 << 20, f"the host grew by {grown >> 20} MiB"
        # what was held back arrives whole and in order once the reader reads, and the sender goes on
        assert "INTACT" in await _run(kernel, READ_STREAM.format(size=held + (8 << 20)))
    finally:
        set_mode(None)


async def test_an_end_of_stream_one_way_is_passed_on(kernel: Kernel, servers: Servers) -> None:
    assert "REPLY got 300000" in await _run(kernel, HALF_CLOSE.format(port=servers.port(servers.count)))


async def test_the_proxys_thread_ends_with_its_last_kernel(tmp_path: Path) -> None:
    """No kernel registered, no thread: the loop starts with the first registration and ends after the last."""

    def loops() -> int:
        return sum(thread.name == "freeact-sub-proxy" for thread in threading.enumerate())

    before, own = loops(), Proxy()
    first = own.register(str(tmp_path / "a.sock"), ("ok.test",), "a")
    second = own.register(str(tmp_path / "b.sock"), ("ok.test",), "b")
    assert loops() == before + 1  # one for both
    first.close()
    assert loops() == before + 1 and not (tmp_path / "a.sock").exists()
    second.close()
    assert await _until(lambda: loops() == before, 5) and not (tmp_path / "b.sock").exists()


async def test_both_sockets_of_a_relayed_connection_pass_bytes_on_at_once(tmp_path: Path) -> None:
    """No Nagle delay on either side of a relayed connection: the kernel's side inherits it from the listening
    socket the kernel handed over (set once there), the server's side is made so."""
    own = Proxy()
    registration = own.register(str(tmp_path / "p.sock"), ("127.0.0.1/32",), "nodelay")
    try:
        registration.arm()
        with socket.create_server(("127.0.0.1", 0)) as upstream, socket.create_server(("127.0.0.1", 0)) as listener:
            with socket.socket(socket.AF_UNIX) as handing:
                handing.connect(registration.path)
                socket.send_fds(handing, [b"L"], [listener.fileno()])
                assert handing.recv(1) == b"K"
            with socket.create_connection(listener.getsockname(), timeout=10) as client:
                client.sendall(f"CONNECT 127.0.0.1:{upstream.getsockname()[1]} HTTP/1.1\r\n\r\n".encode())
                assert client.recv(100).startswith(b"HTTP/1.1 200")
                relays = [connection for connection in registration._open if isinstance(connection, Relay)]
                assert len(relays) == 1
                for side in (relays[0].client, relays[0].upstream):
                    assert side.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY), side
    finally:
        registration.close()
