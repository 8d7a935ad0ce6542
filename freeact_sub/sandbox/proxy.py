"""The filtering proxy: a kernel whose profile lists hosts reaches the network only through it.

Such a kernel runs in a network namespace of its own with nothing but loopback. Before any of its code runs it
listens on 127.0.0.1:`PROXY_PORT` there and hands that listening socket to the host (`enforce.apply`), through a
Unix socket in the kernel's own folder that the host armed for this one start (`Proxy.register`). From then on the
host accepts the kernel's connections itself, in one thread with its own event loop, and for each:

- reads one request head: `CONNECT host:port` (a tunnel, for HTTPS) or a plain-HTTP request in absolute form
  (`GET http://host/path`); anything else (SOCKS, a bare `GET /`, `https://` in absolute form) is refused;
- checks the name against the profile's hosts *before* resolving it (a refused name is never looked up, so the
  names a cell makes up do not leak out through DNS), refuses an IP literal unless a listed network holds it;
- resolves the name itself and refuses a private, loopback, link-local or reserved address unless a listed
  network holds it (nor can a name be rebound between the check and the connection: it connects to the
  addresses it checked);
- connects, and then only relays bytes. A plain-HTTP request goes out with its `Host` set to the checked host
  and `Connection: close`, so nothing else rides on that connection to another host.

Every refusal is logged (`freeact_sub.sandbox.proxy`) and kept for the kernel's agent, which adds one
`[sandbox] …` line naming the host and the profile to the cell's output. The kernel's proxy variables
(`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `PIP_PROXY`, lower-case too) point its programs here.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .hosts import address_allowed, host_allowed, normalise_host

__all__ = ["PROXY_PORT", "Proxy", "Refusal", "Registration", "proxy", "proxy_environment", "set_resolver"]

PROXY_PORT = 3128
"""Where a kernel's programs find the proxy: 127.0.0.1 in the kernel's own network namespace."""
_HEAD_LIMIT = 64 * 1024
_HEAD_TIMEOUT = 30.0
_CONNECT_TIMEOUT = 15.0
_CHUNK = 256 * 1024

log = logging.getLogger("freeact_sub.sandbox.proxy")

Resolver = Callable[[str, int], Awaitable[list[str]]]


@dataclass(frozen=True)
class Refusal:
    """A connection the proxy refused."""

    host: str
    port: int
    reason: str


async def _system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


_resolver: Resolver = _system_resolver


def set_resolver(resolver: Resolver | None) -> None:
    """Resolve names with `resolver` (`async (host, port) -> [addresses]`) instead of the system's; None: the
    system's again. For tests and benchmarks, which map names to servers on 127.0.0.1."""
    global _resolver
    _resolver = resolver or _system_resolver


def proxy_environment(port: int = PROXY_PORT) -> dict[str, str]:
    """The variables that send a kernel's HTTP clients (pip, urllib, requests, httpx, curl) through the proxy."""
    url = f"http://127.0.0.1:{port}"
    env = {name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "PIP_PROXY")}
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
        self._channel: socket.socket | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self._serving: asyncio.Future[None] | None = None
        self.closed = False

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
        self._owner.call(self._close)
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    async def _close(self) -> None:
        for server in self._servers:
            server.close()
        self._servers.clear()
        if self._channel is not None:
            asyncio.get_running_loop().remove_reader(self._channel.fileno())
            self._channel.close()
            self._channel = None

    async def open(self) -> None:
        """Listen at `path` (on the proxy's loop)."""
        channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        channel.bind(self.path)
        os.chmod(self.path, 0o600)
        channel.listen(4)
        channel.setblocking(False)
        self._channel = channel
        asyncio.get_running_loop().add_reader(channel.fileno(), self._take)

    def _take(self) -> None:
        """A kernel hands over its listening socket: take it if armed, and serve it in place of the last one."""
        assert self._channel is not None
        try:
            connection, _ = self._channel.accept()
        except OSError:
            return
        with connection:
            if not self._armed or self.closed:
                return  # only the kernel's own start hands a socket over, once
            connection.setblocking(True)
            connection.settimeout(5.0)
            try:
                _, fds, _, _ = socket.recv_fds(connection, 1, 1)
            except OSError:
                return
            if not fds:
                return
            listener = socket.socket(fileno=fds[0])
            usable = (self._armed and not self.closed and listener.family == socket.AF_INET
                      and listener.type == socket.SOCK_STREAM
                      and listener.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1)
            if not usable:
                listener.close()
                return
            self._armed = False
            self._serving = asyncio.ensure_future(self._serve(listener, connection.dup()))

    async def _serve(self, listener: socket.socket, answer: socket.socket) -> None:
        for server in self._servers:
            server.close()  # a restarted kernel's namespace replaces the last one
        listener.setblocking(False)
        server = await asyncio.start_server(self._owner.handler(self), sock=listener, limit=_HEAD_LIMIT)
        self._servers = [server]
        with answer, contextlib.suppress(OSError):
            answer.sendall(b"K")


class Proxy:
    """The host's filtering proxy: one thread with its own event loop, serving every kernel that registered."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._started:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="freeact-sub-proxy", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def call(self, function: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """Run `function()` on the proxy's loop and wait for it."""
        loop = self._start()
        if threading.current_thread() is self._thread:
            return asyncio.ensure_future(function())
        return asyncio.run_coroutine_threadsafe(function(), loop).result(30)

    def register(self, path: str, hosts: Iterable[str], profile: str) -> Registration:
        """A kernel's registration: the Unix socket at `path` (in the host's part of the kernel's folder) takes its
        listening socket, and its connections may reach `hosts`."""
        registration = Registration(self, path, tuple(hosts), profile)
        self.call(registration.open)
        return registration

    def cpu_seconds(self) -> float:
        """The CPU time the proxy's thread has used so far."""
        if self._thread is None or self._thread.native_id is None:
            return 0.0
        try:
            clock = time.pthread_getcpuclockid(self._thread.ident or 0)
            return time.clock_gettime(clock)
        except (OSError, AttributeError, OverflowError):
            return 0.0

    def handler(self, registration: Registration) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                                              Awaitable[None]]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await _handle(registration, reader, writer)
            except Exception as exc:  # one broken connection never stops the proxy
                log.debug("sandbox proxy connection failed: %r", exc)
            finally:
                writer.close()

        return handle


async def _handle(registration: Registration, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        first = await asyncio.wait_for(reader.readexactly(1), _HEAD_TIMEOUT)
        if not first.isalpha():  # SOCKS (0x04, 0x05), TLS (0x16) and the like: not an HTTP request, say so at once
            registration.refuse(Refusal("(not HTTP)", 0, "only HTTP CONNECT and plain-HTTP requests go through the "
                                                         "sandbox's proxy"))
            await _answer(writer, 400, "not an HTTP proxy request")
            return
        head = first + await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_TIMEOUT)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
        await _answer(writer, 400, "not an HTTP proxy request")
        return
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        await _answer(writer, 400, "not an HTTP proxy request")
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
            await _answer(writer, 405, "only CONNECT and plain http:// requests")
            return
        host, port = _authority(url.netloc.rpartition("@")[2], 80)
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    verdict = await _check(registration, host, port)
    if isinstance(verdict, Refusal):
        registration.refuse(verdict)
        await _answer(writer, 403, f"[sandbox] {verdict.host}:{verdict.port} refused: {verdict.reason}")
        return
    upstream = await _connect(verdict, port)
    if upstream is None:
        await _answer(writer, 502, f"could not connect to {host}:{port}")
        return
    up_reader, up_writer = upstream
    try:
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        else:
            kept = [line for line in lines[1:] if line and line.split(":", 1)[0].strip().lower() not in _HOP_HEADERS]
            authority = host if port == 80 else f"{host}:{port}"
            head_out = "\r\n".join([f"{method} {path} {version}", f"Host: {authority}", *kept, "Connection: close",
                                    "", ""])
            up_writer.write(head_out.encode("latin-1"))
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
    finally:
        up_writer.close()


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


async def _check(registration: Registration, raw_host: str, port: int) -> list[str] | Refusal:
    """The addresses to connect to, or why not. The name is checked before it is resolved."""
    profile = registration.profile
    host = normalise_host(raw_host)
    if host is None or not 0 < port < 65536:
        return Refusal(raw_host[:100], port, f"not a host name and port (profile {profile!r})")
    literal = _ip(host)
    if literal is not None:
        if not any("/" in entry and _same_version(entry, literal) and literal in ipaddress.ip_network(entry)
                   for entry in registration.hosts):
            return Refusal(host, port, f"an IP address the profile {profile!r} does not list (it allows "
                                       f"{_listed(registration.hosts)})")
        return [str(literal)]
    if not host_allowed(host, registration.hosts):
        return Refusal(host, port, f"not a host the profile {profile!r} allows ({_listed(registration.hosts)})")
    try:
        addresses = await asyncio.wait_for(_resolver(host, port), _CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        return Refusal(host, port, f"it does not resolve ({exc})")
    allowed = [address for address in addresses
               if (ip := _ip(address)) is not None and address_allowed(ip, registration.hosts)]
    if not allowed:
        return Refusal(host, port, f"it resolves to {', '.join(addresses) or 'nothing'}: private addresses are "
                                   f"refused unless the profile {profile!r} lists their network")
    return allowed


def _same_version(entry: str, address: Any) -> bool:
    try:
        return ipaddress.ip_network(entry).version == address.version
    except ValueError:
        return False


def _listed(hosts: tuple[str, ...]) -> str:
    return "only " + ", ".join(hosts) if hosts else "no host"


def _ip(text: str) -> Any:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


async def _connect(addresses: list[str], port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    for address in addresses:
        try:
            return await asyncio.wait_for(asyncio.open_connection(address, port, limit=_CHUNK), _CONNECT_TIMEOUT)
        except (OSError, TimeoutError):
            continue
    return None


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reasons = {400: "Bad Request", 403: "Forbidden", 405: "Method Not Allowed", 502: "Bad Gateway"}
    body = (text + "\n").encode("utf-8", errors="replace")
    writer.write(f"HTTP/1.1 {status} {reasons.get(status, 'Error')}\r\nContent-Type: text/plain\r\n"
                 f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    with contextlib.suppress(ConnectionError, OSError):
        await writer.drain()


_shared: Proxy | None = None


def proxy() -> Proxy:
    """The process's proxy (its thread starts with the first registration)."""
    global _shared
    if _shared is None:
        _shared = Proxy()
    return _shared
