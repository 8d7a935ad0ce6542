"""The filtering proxy: a kernel whose profile lists hosts reaches the network only through it.

Such a kernel runs in a network namespace of its own with nothing but loopback. Before any of its code runs it
listens on 127.0.0.1:`PROXY_PORT` there and hands that listening socket to the host (`enforce.apply`), through a
Unix socket in the kernel's own folder that the host armed for this one start (`Proxy.register`). From then on the
host accepts the kernel's connections itself (a thread per kernel), and for each, in a thread of its own:

- reads one request head: `CONNECT host:port` (a tunnel, for HTTPS) or a plain-HTTP request in absolute form
  (`GET http://host/path`); anything else (SOCKS, a bare `GET /`, `https://` in absolute form) is refused;
- checks the name against the profile's hosts *before* resolving it (a refused name is never looked up, so the
  names a cell makes up do not leak out through DNS), refuses an IP literal unless a listed network holds it;
- resolves the name itself and refuses a private, loopback, link-local or reserved address unless a listed
  network holds it (nor can a name be rebound between the check and the connection: it connects to the
  addresses it checked);
- connects, and then only relays bytes (with `splice`: the kernel copies them, the host's Python does not;
  at most `MAX_CONNECTIONS` at once per kernel). A plain-HTTP request goes out with its `Host` set to the checked host
  and `Connection: close`, so nothing else rides on that connection to another host.

Every refusal is logged (`freeact_sub.sandbox.proxy`) and kept for the kernel's agent, which adds one
`[sandbox] …` line naming the host and the profile to the cell's output. The kernel's proxy variables
(`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `PIP_PROXY`, lower-case too) point its programs here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from .hosts import destination
from .relay import MAX_CONNECTIONS, Workers, relay

__all__ = ["MAX_CONNECTIONS", "PROXY_PORT", "Proxy", "Refusal", "Registration", "proxy", "proxy_environment",
           "set_resolver"]

PROXY_PORT = 3128
"""Where a kernel's programs find the proxy: 127.0.0.1 in the kernel's own network namespace."""
_HEAD_LIMIT = 64 * 1024
_HEAD_TIMEOUT = 30.0
_CONNECT_TIMEOUT = 15.0

log = logging.getLogger("freeact_sub.sandbox.proxy")

Resolver = Callable[[str, int], list[str]]


@dataclass(frozen=True)
class Refusal:
    """A connection the proxy refused."""

    host: str
    port: int
    reason: str


def _system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


_resolver: Resolver = _system_resolver


def set_resolver(resolver: Resolver | None) -> None:
    """Resolve names with `resolver` (`(host, port) -> [addresses]`, called in a proxy thread) instead of the
    system's; None: the system's again. For tests and benchmarks, which map names to servers on 127.0.0.1."""
    global _resolver
    _resolver = resolver or _system_resolver


def proxy_environment(port: int = PROXY_PORT) -> dict[str, str]:
    """The variables that send a kernel's HTTP clients (pip, urllib, requests, httpx, curl, git, npm) through the
    proxy."""
    url = f"http://127.0.0.1:{port}"
    env = {name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "PIP_PROXY", "npm_config_proxy",
                                  "npm_config_https_proxy")}
    env.update({name.lower(): url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")})
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"  # the kernel's own loopback stays its own
    return env


class Registration:
    """One kernel's way to the proxy: the Unix socket it hands its listening socket through, and its refusals."""

    def __init__(self, owner: Proxy, path: str, hosts: tuple[str, ...], profile: str) -> None:
        self._owner = owner
        self.path = path
        self.hosts = hosts
        self.profile = profile
        self._refusals: list[Refusal] = []
        self._lock = threading.Lock()
        self._armed = False
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        """The kernel's connections being served (ended at `close()`)."""
        self.closed = False
        self._channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self._channel.bind(path)
        os.chmod(path, 0o600)
        self._channel.listen(4)
        threading.Thread(target=self._take, name="freeact-sub-proxy-register", daemon=True).start()

    def arm(self) -> None:
        """Take the listening socket of the kernel's next start (one, and none after it)."""
        self._armed = True

    def refusals(self) -> list[Refusal]:
        """The refusals since the last call (each once)."""
        with self._lock:
            taken, self._refusals = self._refusals, []
        return taken

    def refuse(self, refusal: Refusal) -> None:
        log.warning("sandbox proxy refused %s:%s for the profile %r: %s", refusal.host, refusal.port, self.profile,
                    refusal.reason)
        with self._lock:
            self._refusals.append(refusal)

    def close(self) -> None:
        """Stop taking connections from this kernel (its listening socket closes; the Unix socket goes)."""
        if self.closed:
            return
        self.closed = True
        with self._lock:
            serving = list(self._open)
        for sock in (self._channel, self._listener, *serving):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
                sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    def _take(self) -> None:
        """Kernels hand over their listening sockets here: take one if armed, and serve it in place of the last."""
        while not self.closed:
            try:
                connection, _ = self._channel.accept()
            except OSError:
                return
            with connection:
                if not self._armed or self.closed:
                    continue  # only the kernel's own start hands a socket over, once
                connection.settimeout(5.0)
                try:
                    _, fds, _, _ = socket.recv_fds(connection, 1, 1)
                except OSError:
                    continue
                if not fds:
                    continue
                listener = socket.socket(fileno=fds[0])
                if not (listener.family == socket.AF_INET and listener.type == socket.SOCK_STREAM
                        and listener.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1):
                    listener.close()
                    continue
                self._armed = False
                previous, self._listener = self._listener, listener
                if previous is not None:  # a restarted kernel's namespace replaces the last one
                    with contextlib.suppress(OSError):
                        previous.shutdown(socket.SHUT_RDWR)
                    previous.close()
                listener.setblocking(True)
                pool = Workers()
                threading.Thread(target=self._accept, args=(listener, pool), name="freeact-sub-proxy",
                                 daemon=True).start()
                with contextlib.suppress(OSError):
                    connection.sendall(b"K")

    def spent(self, seconds: float) -> None:
        """Count `seconds` of CPU to the proxy."""
        self._owner.spent(seconds)

    def _accept(self, listener: socket.socket, pool: Workers) -> None:
        """A worker: accept a connection and serve it, again and again. A worker that takes the last idle place
        starts another (up to `MAX_CONNECTIONS`); one that finds `_IDLE_WORKERS` idle after a connection ends. So a
        connection costs no thread start and no hand-over between threads while a few wait."""
        try:
            while not self.closed and self._listener is listener:
                try:
                    client, _ = listener.accept()
                except OSError:
                    return
                if pool.taken():
                    threading.Thread(target=self._accept, args=(listener, pool), name="freeact-sub-proxy",
                                     daemon=True).start()
                self._serve(client)
                if not pool.freed():
                    return
        finally:
            pool.ended()

    def _serve(self, client: socket.socket) -> None:
        began = time.thread_time()
        with self._lock:
            self._open.add(client)
        try:
            with client:
                _handle(self, client)
        except Exception as exc:  # one broken connection never stops the proxy
            log.debug("sandbox proxy connection failed: %r", exc)
        finally:
            with self._lock:
                self._open.discard(client)
            self._owner.spent(time.thread_time() - began)


class Proxy:
    """The host's filtering proxy: every kernel that registered, served by threads of the host's."""

    def __init__(self) -> None:
        self._cpu = 0.0
        self._cpu_lock = threading.Lock()

    def register(self, path: str, hosts: Iterable[str], profile: str) -> Registration:
        """A kernel's registration: the Unix socket at `path` (in the host's part of the kernel's folder) takes its
        listening socket, and its connections may reach `hosts`."""
        return Registration(self, path, tuple(hosts), profile)

    def spent(self, seconds: float) -> None:
        with self._cpu_lock:
            self._cpu += seconds

    def cpu_seconds(self) -> float:
        """The CPU time the proxy's connection threads have used so far (those that ended)."""
        return self._cpu


def _read_head(client: socket.socket) -> tuple[bytes, bytes] | None:
    """The request head and what came after it, or None if it is no HTTP request."""
    client.settimeout(_HEAD_TIMEOUT)
    data = client.recv(_HEAD_LIMIT)
    if not data or not data[:1].isalpha():  # SOCKS (0x04, 0x05), TLS (0x16): not HTTP
        return None
    while b"\r\n\r\n" not in data:
        if len(data) > _HEAD_LIMIT or not (more := client.recv(_HEAD_LIMIT)):
            return None
        data += more
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _handle(registration: Registration, client: socket.socket) -> None:
    try:
        read = _read_head(client)
    except (OSError, TimeoutError):
        return
    if read is None:
        registration.refuse(Refusal("", 0, "not an HTTP request: only HTTP CONNECT and plain-HTTP requests go "
                                           "through the sandbox's proxy"))
        _answer(client, 400, "not an HTTP proxy request")
        return
    head, rest = read
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        _answer(client, 400, "not an HTTP proxy request")
        return
    method, target, version = parts
    if method == "CONNECT":
        host, port = _authority(target, 443)
        path = ""
    else:
        url = urlsplit(target)
        if url.scheme != "http" or not url.hostname:
            registration.refuse(Refusal(target[:100], 0, "only HTTP CONNECT and plain-HTTP requests in absolute "
                                                          "form go through the sandbox's proxy"))
            _answer(client, 405, "only CONNECT and plain http:// requests")
            return
        host, port = _authority(url.netloc.rpartition("@")[2], 80)
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    verdict = _check(registration, host, port)
    if isinstance(verdict, Refusal):
        registration.refuse(verdict)
        _answer(client, 403, f"[sandbox] {verdict.host}:{verdict.port} refused: {verdict.reason}")
        return
    upstream = _connect(verdict, port)
    if upstream is None:
        _answer(client, 502, f"could not connect to {host}:{port}")
        return
    with upstream:
        client.settimeout(None)  # blocking again: splice on a non-blocking socket stops at the first EAGAIN
        upstream.settimeout(None)
        if method == "CONNECT":
            client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        else:
            kept = [line for line in lines[1:] if line and line.split(":", 1)[0].strip().lower() not in _HOP_HEADERS]
            authority = host if port == 80 else f"{host}:{port}"
            head_out = "\r\n".join([f"{method} {path} {version}", f"Host: {authority}", *kept, "Connection: close",
                                    "", ""])
            upstream.sendall(head_out.encode("latin-1"))
        if rest:
            upstream.sendall(rest)
        body = method == "CONNECT" or any(
            name in ("transfer-encoding", "content-length") and value.strip() != "0"
            for name, _, value in (line.partition(":") for line in (raw.lower() for raw in lines[1:])))
        relay(client, upstream, registration.spent, both_ways=body)


_HOP_HEADERS = frozenset({"host", "connection", "proxy-connection", "keep-alive", "proxy-authorization",
                          "proxy-authenticate", "te", "upgrade"})


def _authority(text: str, default_port: int) -> tuple[str, int]:
    host, port = text, default_port
    if text.startswith("["):
        end = text.find("]")
        host, rest = text[1:end], text[end + 1:]
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
    elif text.count(":") == 1:
        host, _, number = text.partition(":")
        port = int(number) if number.isdigit() else -1
    return host, port


def _check(registration: Registration, raw_host: str, port: int) -> list[str] | Refusal:
    """The addresses to connect to, or why not (`hosts.destination`: the name is checked before it is resolved)."""
    verdict = destination(raw_host, port, registration.hosts, _resolver)
    if isinstance(verdict, tuple):
        return Refusal(*verdict)
    return verdict


def _connect(addresses: list[str], port: int) -> socket.socket | None:
    for address in addresses:
        try:
            return socket.create_connection((address, port), timeout=_CONNECT_TIMEOUT)
        except OSError:
            continue
    return None


def _answer(client: socket.socket, status: int, text: str) -> None:
    reasons = {400: "Bad Request", 403: "Forbidden", 405: "Method Not Allowed", 502: "Bad Gateway"}
    body = (text + "\n").encode("utf-8", errors="replace")
    with contextlib.suppress(OSError):
        client.sendall(f"HTTP/1.1 {status} {reasons.get(status, 'Error')}\r\nContent-Type: text/plain\r\n"
                       f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)


_shared: Proxy | None = None


def proxy() -> Proxy:
    """The process's proxy."""
    global _shared
    if _shared is None:
        _shared = Proxy()
    return _shared
