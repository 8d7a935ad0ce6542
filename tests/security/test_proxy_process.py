"""The proxy's own process: it starts with the first registration, ends after the last, ends with its host (also when
the host is killed), is replaced when it died, and the host falls back to a thread when it cannot start. Real
processes, real sockets; no kernel (a kernel's hand-over is done here as `enforce` does it).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from freeact_sub.sandbox.proxy import Registration
from freeact_sub.sandbox.proxy_client import ProxyProcess, RemoteRegistration
from freeact_sub.sandbox.proxy_request import set_resolver

ROOT = Path(__file__).resolve().parents[2]


def _gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


@pytest.fixture(scope="module")
def upstream() -> Iterator[int]:
    """A server on 127.0.0.1 that answers every connection with `hello`; its port."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            with connection:
                connection.recv(4096)
                connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    set_resolver(lambda host, port: ["127.0.0.1"] if host == "up.test" else [])
    try:
        yield int(server.getsockname()[1])
    finally:
        set_resolver(None)
        server.shutdown(socket.SHUT_RDWR)  # wakes its accept()
        server.close()
        thread.join(5)


def _hand_over(registration: RemoteRegistration | Registration) -> socket.socket:
    """What a kernel's start does: arm, then hand a listening socket over; the socket the kernel's programs reach."""
    registration.arm()
    listener = socket.create_server(("127.0.0.1", 0))
    assert registration.path is not None
    with socket.socket(socket.AF_UNIX) as handing:
        handing.settimeout(10)
        handing.connect(registration.path)
        socket.send_fds(handing, [b"L"], [listener.fileno()])
        assert handing.recv(1) == b"K"
    return listener


def _get(listener: socket.socket, host: str, port: int) -> bytes:
    with socket.create_connection(listener.getsockname(), timeout=10) as client:
        client.sendall(f"GET http://{host}:{port}/ HTTP/1.1\r\n\r\n".encode())
        answer = b""
        while chunk := client.recv(4096):
            answer += chunk
        return answer


def test_it_serves_from_the_first_registration_to_the_last(tmp_path: Path, upstream: int) -> None:
    own = ProxyProcess()
    assert own.pid is None  # nothing registered: nothing runs
    first = own.register(str(tmp_path / "a.sock"), ("up.test", "127.0.0.1/32"), "a")
    second = own.register(str(tmp_path / "b.sock"), ("up.test", "127.0.0.1/32"), "b")
    assert isinstance(first, RemoteRegistration) and isinstance(second, RemoteRegistration)
    pid = own.pid
    assert pid is not None and pid != os.getpid() and psutil.Process(pid).ppid() == os.getpid()
    with _hand_over(first) as listener:
        assert _get(listener, "up.test", upstream).endswith(b"hello")
        assert b"403" in _get(listener, "evil.test", upstream)  # refused in the process, reported to the host
        assert [(refusal.host, refusal.port) for refusal in first.refusals()] == [("evil.test", upstream)]
        # a connection held open is closed when its kernel's registration closes
        held = socket.create_connection(listener.getsockname(), timeout=10)
        held.sendall(f"CONNECT up.test:{upstream} HTTP/1.1\r\n\r\n".encode())
        assert held.recv(100).startswith(b"HTTP/1.1 200")
        assert first.open_connections() == 1
        first.close()
        assert held.recv(100) == b""  # (the server answers only once it got a request: nothing came from it)
        held.close()
    assert not (tmp_path / "a.sock").exists() and own.pid == pid  # one more registration: it still runs
    second.close()
    assert _gone(pid) and own.pid is None


def test_kernels_register_from_many_threads_at_once_with_one_process(tmp_path: Path, upstream: int) -> None:
    own = ProxyProcess()
    found: list[RemoteRegistration | Registration] = []
    threads = [
        threading.Thread(
            target=lambda n=n: found.append(own.register(str(tmp_path / f"{n}.sock"), ("up.test", "127.0.0.1/32"), "t"))
        )
        for n in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    try:
        assert len(found) == 8 and all(isinstance(registration, RemoteRegistration) for registration in found)
        assert (
            len({registration.session for registration in found if isinstance(registration, RemoteRegistration)}) == 1
        )
        for registration in found:
            with _hand_over(registration) as listener:
                assert _get(listener, "up.test", upstream).endswith(b"hello")
    finally:
        pid = own.pid
        for registration in found:
            registration.close()
    assert pid is not None and _gone(pid)


def test_it_ends_with_its_host_also_when_the_host_is_killed(tmp_path: Path) -> None:
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(tmp_path / "h.sock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert host.stdout is not None
        pid = int(host.stdout.readline())
        assert psutil.Process(pid).ppid() == host.pid
        host.kill()  # SIGKILL: nothing of the host runs to stop it
        host.wait()
        assert _gone(pid), "the proxy's process outlived its host"
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


HOST = """
import sys
from freeact_sub.sandbox.proxy_client import ProxyProcess
own = ProxyProcess()
registration = own.register(sys.argv[1], ("up.test", "127.0.0.1/32"), "host")
print(own.pid, flush=True)
sys.stdin.read()
"""


def test_a_registration_after_it_died_starts_another(tmp_path: Path, upstream: int) -> None:
    own = ProxyProcess()
    first = own.register(str(tmp_path / "a.sock"), ("up.test", "127.0.0.1/32"), "a")
    assert isinstance(first, RemoteRegistration)
    first_listener = _hand_over(first)
    pid = own.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # ours: started by this test's proxy
    assert _gone(pid)
    deadline = time.monotonic() + 5
    while own.pid is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    # the kernel registered with it is told, once
    lost = first.refusals()
    assert len(lost) == 1 and "proxy process ended" in lost[0].reason and first.refusals() == []
    second = own.register(str(tmp_path / "b.sock"), ("up.test", "127.0.0.1/32"), "b")
    assert own.pid not in (None, pid)
    with _hand_over(second) as listener:
        assert _get(listener, "up.test", upstream).endswith(b"hello")
    # the first kernel's restart hands its new socket to the new process
    with _hand_over(first) as again:
        assert _get(again, "up.test", upstream).endswith(b"hello")
    first_listener.close()
    new_pid = own.pid
    assert new_pid is not None
    first.close()
    second.close()
    assert _gone(new_pid)


def test_a_proxy_that_cannot_start_leaves_it_to_a_thread_and_says_so(
    tmp_path: Path, upstream: int, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "broken_proxy.py"
    broken.write_text("import time\ntime.sleep(0.3)\nraise SystemExit(3)\n")  # fails after the kernel handed over
    own = ProxyProcess(script=str(broken))
    with caplog.at_level(logging.WARNING, logger="freeact_sub.sandbox.proxy"):
        registration = own.register(str(tmp_path / "a.sock"), ("up.test", "127.0.0.1/32"), "a")
        assert isinstance(registration, RemoteRegistration)  # nobody waits for the process to start
        later: RemoteRegistration | Registration | None = None
        try:
            with _hand_over(registration) as listener:  # the kernel has its network, from the host's own thread
                assert _get(listener, "up.test", upstream).endswith(b"hello")
            assert registration.delegate is not None
            assert any("not in a process of its own" in record.getMessage() for record in caplog.records)
            later = own.register(str(tmp_path / "b.sock"), ("up.test", "127.0.0.1/32"), "b")
            assert isinstance(later, Registration)  # from then on, no more attempts
        finally:
            registration.close()
            if later is not None:
                later.close()
