"""The filtering proxy: a kernel whose profile lists hosts reaches the network only through it.

Such a kernel runs in a network namespace of its own with nothing but loopback. Before any of its code runs it
listens on 127.0.0.1:`PROXY_PORT` there and hands that listening socket to the host (`enforce.apply`), through a
Unix socket in the kernel's own folder that the host armed for this one start (`Proxy.register`). From then on the
host accepts the kernel's connections itself, and for each (`proxy_request.Incoming`):

- reads one request head: `CONNECT host:port` (a tunnel, for HTTPS) or a plain-HTTP request in absolute form
  (`GET http://host/path`); anything else (SOCKS, a bare `GET /`, `https://` in absolute form) is refused;
- checks the name against the profile's hosts *before* resolving it (a refused name is never looked up, so the
  names a cell makes up do not leak out through DNS), refuses an IP literal unless a listed network holds it;
- resolves the name itself and refuses a private, loopback, link-local or reserved address unless a listed
  network holds it (nor can a name be rebound between the check and the connection: it connects to the
  addresses it checked);
- connects, and then only relays bytes (`relay.Relay`: at most a chunk held per direction, half-closes passed on;
  at most `MAX_CONNECTIONS` at once per kernel). A plain-HTTP request goes out with its `Host` set to the checked
  host and `Connection: close`, so nothing else rides on that connection to another host.

All of it, for every kernel, runs in one thread of the host's (`proxy_loop.Loop`, a selector loop), with a few
threads for name lookups: an idle connection costs two sockets, no thread and no buffer.

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
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

from .proxy_loop import READ, Loop, Timer
from .proxy_request import Incoming, Refusal, set_resolver
from .relay import MAX_CONNECTIONS, Relay, close_idle_pipes

__all__ = [
    "MAX_CONNECTIONS",
    "PROXY_PORT",
    "Proxy",
    "Refusal",
    "Registration",
    "proxy",
    "proxy_environment",
    "set_resolver",
]

PROXY_PORT = 3128
"""Where a kernel's programs find the proxy: 127.0.0.1 in the kernel's own network namespace."""
_REFUSALS_KEPT = 100
"""Distinct refusals (host and port) kept for a kernel's agent between two cells; a flood of them costs nothing more."""
_HANDOVER_TIMEOUT = 5.0
_LOOKUPS_AT_ONCE = 2

log = logging.getLogger("freeact_sub.sandbox.proxy")


def proxy_environment(port: int = PROXY_PORT) -> dict[str, str]:
    """The variables that send a kernel's HTTP clients (pip, urllib, requests, httpx, curl, git, npm) through the
    proxy."""
    url = f"http://127.0.0.1:{port}"
    env = {
        name: url
        for name in (
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "PIP_PROXY",
            "npm_config_proxy",
            "npm_config_https_proxy",
        )
    }
    env.update({name.lower(): url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")})
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"  # the kernel's own loopback stays its own
    return env


class Registration:
    """One kernel's way to the proxy: the Unix socket it hands its listening socket through, and its refusals.

    Everything but `arm`, `refusals` and `close` happens in the proxy's loop."""

    def __init__(self, owner: Proxy, loop: Loop, path: str, hosts: tuple[str, ...], profile: str) -> None:
        self._owner = owner
        self.loop = loop
        self.path = path
        self.hosts = hosts
        self.profile = profile
        self._refusals: dict[tuple[str, int], Refusal] = {}
        self._lock = threading.Lock()
        self._armed = False
        self._listener: socket.socket | None = None
        self._open: set[Incoming | Relay] = set()
        """The kernel's connections being served (ended at `close()`)."""
        self._handovers: set[_Handover] = set()
        self._looking = 0
        self._waiting: deque[tuple[Callable[[], Any], Callable[[Future[Any]], None]]] = deque()
        self.closed = False
        self._channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self._channel.bind(path)
        os.chmod(path, 0o600)
        self._channel.listen(4)
        self._channel.setblocking(False)
        loop.call(self._watch_channel)

    def _watch_channel(self) -> None:
        if not self.closed:
            self.loop.watch(self._channel, self, READ)

    def arm(self) -> None:
        """Take the listening socket of the kernel's next start (one, and none after it)."""
        self._armed = True

    def refusals(self) -> list[Refusal]:
        """The refusals since the last call (each host and port once)."""
        with self._lock:
            taken, self._refusals = list(self._refusals.values()), {}
        return taken

    def refuse(self, refusal: Refusal) -> None:
        with self._lock:
            key = (refusal.host, refusal.port)
            if key in self._refusals or len(self._refusals) >= _REFUSALS_KEPT:
                return
            self._refusals[key] = refusal
        log.warning(
            "sandbox proxy refused %s:%s for the profile %r: %s",
            refusal.host,
            refusal.port,
            self.profile,
            refusal.reason,
        )

    def close(self) -> None:
        """Stop taking connections from this kernel: its listening socket and its connections close, the Unix
        socket goes."""
        if self.closed:
            return
        self.closed = True
        self.loop.run(self._close_now)
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        self._owner.released(self.loop)

    def _close_now(self) -> None:
        self._waiting.clear()
        for connection in [*self._open, *self._handovers]:
            connection.close()
        self.loop.close(self._channel)
        if self._listener is not None:
            self.loop.close(self._listener, shared=True)

    def on_event(self, fd: int, mask: int) -> None:
        if fd == self._channel.fileno():
            self._take()
        elif self._listener is not None and fd == self._listener.fileno():
            self._accept(self._listener)

    def _take(self) -> None:
        """A kernel hands its listening socket over: take one if armed (only the kernel's own start does)."""
        while not self.closed:
            try:
                connection, _ = self._channel.accept()
            except OSError:
                return
            if not self._armed:
                connection.close()
                continue
            self._handovers.add(_Handover(self, connection))

    def listen(self, listener: socket.socket) -> bool:
        """Serve `listener` in place of the last (a restarted kernel's namespace replaces the last one), if armed
        for it; False: not (the caller closes it)."""
        if self.closed or not self._armed:
            return False
        self._armed = False
        previous, self._listener = self._listener, listener
        _tune(listener)
        if previous is not None:
            with contextlib.suppress(OSError):
                previous.shutdown(socket.SHUT_RDWR)
            self.loop.close(previous, shared=True)
        listener.setblocking(False)
        self.loop.watch(listener, self, READ)
        return True

    def handed_over(self, handover: _Handover) -> None:
        self._handovers.discard(handover)

    def _accept(self, listener: socket.socket) -> None:
        while len(self._open) < MAX_CONNECTIONS:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            incoming = Incoming(self, client)
            self._open.add(incoming)
            incoming.start()
        self.loop.watch(listener, self, 0)  # full: one more waits until one ends

    def look_up(self, work: Callable[[], Any], done: Callable[[Future[Any]], None]) -> None:
        """Run `work` (a name lookup) in one of the loop's lookup threads, then `done`: at most
        `_LOOKUPS_AT_ONCE` of this kernel's at a time, so that one kernel's slow names do not hold up the others'."""
        if self._looking >= _LOOKUPS_AT_ONCE:
            self._waiting.append((work, done))
            return
        self._looking += 1

        def finished(future: Future[Any]) -> None:
            self._looking -= 1
            if self._waiting and not self.closed:
                self.look_up(*self._waiting.popleft())
            done(future)

        self.loop.lookup(work, finished)

    def replace(self, old: Incoming, new: Relay) -> None:
        self._open.discard(old)
        self._open.add(new)

    def ended(self, connection: Incoming | Relay) -> None:
        self._open.discard(connection)
        if not self.closed and self._listener is not None and len(self._open) < MAX_CONNECTIONS:
            self.loop.watch(self._listener, self, READ)

    def open_connections(self) -> int:
        """How many of the kernel's connections are being served now."""
        return len(self._open)


def _tune(listener: socket.socket) -> None:
    """What every connection accepted from `listener` inherits, set once instead of per connection: no Nagle delay
    (the kernel's client batched its bytes already)."""
    with contextlib.suppress(OSError):
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Handover:
    """The Unix connection a starting kernel sends its listening socket through."""

    def __init__(self, registration: Registration, connection: socket.socket) -> None:
        self.registration, self.connection = registration, connection
        connection.setblocking(False)
        self._timer: Timer = registration.loop.later(_HANDOVER_TIMEOUT, self.close)
        registration.loop.watch(connection, self, READ)

    def on_event(self, fd: int, mask: int) -> None:
        try:
            _, fds, _, _ = socket.recv_fds(self.connection, 1, 1)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        if fds:
            listener = socket.socket(fileno=fds[0])
            if (
                listener.family == socket.AF_INET
                and listener.type == socket.SOCK_STREAM
                and listener.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
                and self.registration.listen(listener)
            ):
                with contextlib.suppress(OSError):
                    self.connection.send(b"K")
            else:
                listener.close()
        self.close()

    def abort(self) -> None:
        """End it after its handler failed (the loop calls it)."""
        self.close()

    def close(self) -> None:
        self._timer.cancel()
        self.registration.handed_over(self)
        self.registration.loop.close(self.connection)


class Proxy:
    """The host's filtering proxy: every kernel that registered, served by one loop (started with the first
    registration, stopped after the last)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: Loop | None = None
        self._registered = 0
        self._cpu = 0.0

    def register(self, path: str, hosts: Iterable[str], profile: str) -> Registration:
        """A kernel's registration: the Unix socket at `path` (in the host's part of the kernel's folder) takes its
        listening socket, and its connections may reach `hosts`."""
        with self._lock:
            if self._loop is None:
                self._loop = Loop(on_stop=close_idle_pipes)
            self._registered += 1
            loop = self._loop
        return Registration(self, loop, path, tuple(hosts), profile)

    def released(self, loop: Loop) -> None:
        """A registration closed: the loop stops after the last."""
        with self._lock:
            self._registered -= 1
            if self._registered == 0 and self._loop is loop:
                self._cpu += loop.cpu_seconds()
                loop.stop()
                self._loop = None

    def cpu_seconds(self) -> float:
        """The CPU time the proxy's threads have used so far."""
        with self._lock:
            return self._cpu + (self._loop.cpu_seconds() if self._loop is not None else 0.0)


_shared: Proxy | None = None
_shared_lock = threading.Lock()


def proxy() -> Proxy:
    """The process's proxy (kernels register from worker threads: `Kernel._prepare`)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Proxy()
        return _shared
