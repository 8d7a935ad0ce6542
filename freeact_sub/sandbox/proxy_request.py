"""One connection a kernel made to the proxy, from its request head to the relay: `Incoming`, run by the proxy's loop.

It reads one request head (at most `_HEAD_LIMIT` bytes, within `_HEAD_TIMEOUT`), checks the destination against the
kernel's hosts (`hosts.destination`: the name before it is looked up; a lookup runs in one of the loop's lookup
threads), connects without blocking (each address within `_CONNECT_TIMEOUT`), and hands both sockets to a `Relay`.
Whatever is refused gets an HTTP answer and a `Refusal` for the kernel's agent.
"""

from __future__ import annotations

import contextlib
import errno
import select
import socket
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from .hosts import destination
from .proxy_loop import READ, WRITE, Loop, Timer
from .relay import Relay

__all__ = ["Incoming", "Refusal", "Registration", "Resolver", "set_resolver"]

_HEAD_LIMIT = 64 * 1024
_HEAD_TIMEOUT = 30.0
_CONNECT_TIMEOUT = 15.0

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
    """Resolve names with `resolver` (`(host, port) -> [addresses]`, called in a lookup thread) instead of the
    system's; None: the system's again. For tests and benchmarks, which map names to servers on 127.0.0.1."""
    global _resolver
    _resolver = resolver or _system_resolver
    _looked_up.clear()


_LOOKUP_KEPT = 5.0
"""Seconds a name's addresses are used again before it is looked up anew (as a system's resolver cache would)."""
_looked_up: dict[tuple[str, int], tuple[float, list[str]]] = {}


class Registration(Protocol):
    """What a connection needs of its kernel's registration (`proxy.Registration`)."""

    loop: Loop
    hosts: tuple[str, ...]

    def refuse(self, refusal: Refusal) -> None: ...

    def look_up(self, work: Callable[[], Any], done: Callable[[Future[Any]], None]) -> None: ...

    def replace(self, old: Incoming, new: Relay) -> None: ...

    def ended(self, connection: Incoming | Relay) -> None: ...


class _Lookup(Exception):
    """The name passed the check and must be looked up: not in the loop's thread."""


def _recent(host: str, port: int) -> list[str]:
    """The addresses `host` had a moment ago (the check runs on them again), else `_Lookup`."""
    kept = _looked_up.get((host, port))
    if kept is None or kept[0] < time.monotonic():
        raise _Lookup
    return kept[1]


def _look_up(resolver: Resolver) -> Resolver:
    def look_up(host: str, port: int) -> list[str]:
        addresses = resolver(host, port)
        if resolver is _resolver:
            if len(_looked_up) > 1024:
                _looked_up.clear()
            _looked_up[(host, port)] = (time.monotonic() + _LOOKUP_KEPT, list(addresses))
        return addresses

    return look_up


_HOP_HEADERS = frozenset(
    {
        "host",
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "upgrade",
    }
)
_REASONS = {400: "Bad Request", 403: "Forbidden", 405: "Method Not Allowed", 502: "Bad Gateway"}


@dataclass
class _Request:
    method: str
    host: str
    port: int
    path: str
    version: str
    lines: list[str]
    rest: bytes


class Incoming:
    """A kernel's connection until it is relayed or refused (`close()` ends it at any step)."""

    def __init__(self, registration: Registration, client: socket.socket) -> None:
        self.registration, self.loop, self.client = registration, registration.loop, client
        self.closed = False
        self._data = bytearray()
        """The request head so far (a head sent a byte at a time costs what it is long: no copy, no scan again)."""
        self._request: _Request | None = None
        self._addresses: list[str] = []
        self._upstream: socket.socket | None = None
        client.setblocking(False)
        self._timer: Timer | None = None

    def start(self) -> None:
        """Read the request if it is there already, else wait for it (once the registration counts this one)."""
        self._read()
        if self._request is None and not self.closed:
            self._timer = self.loop.later(_HEAD_TIMEOUT, self.close)
            self.loop.watch(self.client, self, READ)

    def on_event(self, fd: int, mask: int) -> None:
        if self._upstream is not None and fd == self._upstream.fileno():
            self._connected()
        elif self._request is None:
            self._read()

    def abort(self) -> None:
        """End it after its handler failed (the loop calls it)."""
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._stop_timer()
        if self._upstream is not None:
            self.loop.close(self._upstream)
        self.loop.close(self.client)
        self.registration.ended(self)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _read(self) -> None:
        try:
            more = self.client.recv(_HEAD_LIMIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        if not self._data and (not more or not more[:1].isalpha()):  # SOCKS (0x04, 0x05), TLS (0x16): not HTTP
            self._not_http()
            return
        searched = max(0, len(self._data) - 3)
        self._data += more
        end = self._data.find(b"\r\n\r\n", searched)
        if end >= 0:
            head, rest = bytes(self._data[:end]), bytes(self._data[end + 4 :])
            self._data = bytearray()
            self._parsed(head, rest)
        elif len(self._data) > _HEAD_LIMIT or not more:
            self._not_http()

    def _not_http(self) -> None:
        self.registration.refuse(
            Refusal(
                "", 0, "not an HTTP request: only HTTP CONNECT and plain-HTTP requests go through the sandbox's proxy"
            )
        )
        self._answer(400, "not an HTTP proxy request")

    def _parsed(self, head: bytes, rest: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self._answer(400, "not an HTTP proxy request")
            return
        method, target, version = parts
        if method == "CONNECT":
            host, port = _authority(target, 443)
            path = ""
        else:
            url = urlsplit(target)
            if url.scheme != "http" or not url.hostname:
                self._refuse(
                    Refusal(
                        target[:100],
                        0,
                        "only HTTP CONNECT and plain-HTTP requests in absolute form go through the sandbox's proxy",
                    ),
                    405,
                    "only CONNECT and plain http:// requests",
                )
                return
            host, port = _authority(url.netloc.rpartition("@")[2], 80)
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        self._request = _Request(method, host, port, path, version, lines, rest)
        self._stop_timer()
        self.loop.forget(self.client)  # what else it sends waits in its socket for the relay
        hosts = self.registration.hosts
        try:
            verdict = destination(host, port, hosts, _recent)
        except _Lookup:
            resolver = _look_up(_resolver)
            self.registration.look_up(lambda: destination(host, port, hosts, resolver), self._resolved)
            return
        self._checked(verdict)

    def _resolved(self, future: Future[list[str] | tuple[str, int, str]]) -> None:
        if self.closed:
            return
        try:
            verdict = future.result()
        except Exception as exc:
            assert self._request is not None
            verdict = (self._request.host, self._request.port, f"it does not resolve ({exc})")
        self._checked(verdict)

    def _checked(self, verdict: list[str] | tuple[str, int, str]) -> None:
        if isinstance(verdict, tuple):
            refusal = Refusal(*verdict)
            self._refuse(refusal, 403, f"[sandbox] {refusal.host}:{refusal.port} refused: {refusal.reason}")
            return
        self._addresses = list(verdict)
        self._connect_next()

    def _connect_next(self) -> None:
        assert self._request is not None
        if self._upstream is not None:
            self.loop.close(self._upstream)
            self._upstream = None
        self._stop_timer()
        while self._addresses:
            address = self._addresses.pop(0)
            upstream = socket.socket(
                socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK
            )
            with contextlib.suppress(OSError):  # the client batched already: pass its bytes on at once
                upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            code = upstream.connect_ex((address, self._request.port))
            if code == 0:
                self._upstream = upstream
                self._relay()
                return
            if code == errno.EINPROGRESS:
                self._upstream = upstream
                ready = select.poll()
                ready.register(upstream, select.POLLOUT)
                if ready.poll(0):  # a nearby server (loopback) has answered already
                    self._connected()
                    return
                self._timer = self.loop.later(_CONNECT_TIMEOUT, self._connect_next)
                self.loop.watch(upstream, self, WRITE)
                return
            upstream.close()
        self._answer(502, f"could not connect to {self._request.host}:{self._request.port}")

    def _connected(self) -> None:
        assert self._upstream is not None
        if self._upstream.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
            self._connect_next()
            return
        self._stop_timer()
        self.loop.forget(self._upstream)
        self._relay()

    def _relay(self) -> None:
        request, upstream = self._request, self._upstream
        assert request is not None and upstream is not None
        registration = self.registration
        if request.method == "CONNECT":
            to_client, to_upstream = b"HTTP/1.1 200 Connection Established\r\n\r\n", request.rest
            both_ways = True
        else:
            kept, both_ways = [], False
            for line in request.lines[1:]:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                if name in _HOP_HEADERS or not line:
                    continue
                kept.append(line)
                if name in ("transfer-encoding", "content-length") and value.strip() != "0":
                    both_ways = True  # a body follows the head
            authority = request.host if request.port == 80 else f"{request.host}:{request.port}"
            head_out = "\r\n".join(
                [
                    f"{request.method} {request.path} {request.version}",
                    f"Host: {authority}",
                    *kept,
                    "Connection: close",
                    "",
                    "",
                ]
            )
            to_client, to_upstream = b"", head_out.encode("latin-1") + request.rest
        # the relay is the connection from now on: this one ends without closing its sockets
        self.closed = True
        self._upstream = None
        relay = Relay(
            self.loop,
            self.client,
            upstream,
            to_upstream=to_upstream,
            to_client=to_client,
            both_ways=both_ways,
            on_end=registration.ended,
        )
        registration.replace(self, relay)
        relay.start()

    def _refuse(self, refusal: Refusal, status: int, text: str) -> None:
        self.registration.refuse(refusal)
        self._answer(status, text)

    def _answer(self, status: int, text: str) -> None:
        body = (text + "\n").encode("utf-8", errors="replace")
        with contextlib.suppress(OSError):  # a few hundred bytes into an empty socket: taken at once
            self.client.send(
                f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: text/plain\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
        self.close()


def _authority(text: str, default_port: int) -> tuple[str, int]:
    host, port = text, default_port
    if text.startswith("["):
        end = text.find("]")
        host, rest = text[1:end], text[end + 1 :]
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
    elif text.count(":") == 1:
        host, _, number = text.partition(":")
        port = int(number) if number.isdigit() else -1
    return host, port
