"""The sandbox's proxy in a process of its own: one loop (`proxy_loop.Loop`) serves the registrations the host sends.

The host (`proxy_client`) starts it with the first kernel that registers and talks to it over one `AF_UNIX`
`SOCK_SEQPACKET` socket, one `marshal`led tuple a message (both ends are ours; no kernel can reach the socket: it was
made as a pair and has no path). The host sends:

    ("register", key, hosts, profile)   with the Unix socket the kernel hands its listening socket through
    ("arm", key)                         the kernel's next start hands one over
    ("close", key, seq)                  its listening socket and connections close; answered ("done", seq, None)
    ("bye",)                             the last registration closed: answered ("final", cpu seconds), then it ends
    ("taken", key)                       the host took its refusals: the next of each host and port is sent again
    ("count", key, seq)                  answered with the kernel's open connections
    ("mode", mode, seq)                  `relay.set_mode` (benchmarks, tests)
    ("resolver", ask, seq)               names are resolved by asking the host (its `set_resolver`), or by the system
    ("cpu", seq)                         answered with this process's CPU seconds
    ("found", n, addresses, error)       the host's answer to a lookup

and it sends the host `("ready", pid)` once, `("refused", key, host, port, reason)` for each refusal (each host and
port once until taken), `("lookup", n, host, port)` and the answers. At the end of the host's stream (the host stopped
it, exited or was killed) every registration closes and the process exits: it never outlives its host.
"""

from __future__ import annotations

import contextlib
import itertools
import marshal
import os
import socket
import threading
import time
from collections import deque
from typing import Any

from .proxy import Registration
from .proxy_loop import READ, WRITE, Loop
from .proxy_request import Refusal, set_resolver
from .relay import close_idle_pipes, set_mode

__all__ = ["MESSAGE_LIMIT", "Server", "main"]

MESSAGE_LIMIT = 64 * 1024
"""The longest message either side sends (a host list, a refusal's reason)."""
_LOOKUP_TIMEOUT = 30.0


class _Registration(Registration):
    key: int


class Server:
    """The proxy's side of the control socket (`on_event` in the loop's thread)."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        control.setblocking(False)
        self.loop = Loop(on_stop=close_idle_pipes)
        self.registrations: dict[int, _Registration] = {}
        self._outbox: deque[bytes] = deque()
        self._lookups: dict[int, list[Any]] = {}
        self._numbers = itertools.count(1)
        self.loop.call(lambda: self.loop.watch(control, self, READ))

    # what a registration tells its owner

    def refused(self, registration: Registration, refusal: Refusal) -> None:
        if isinstance(registration, _Registration):
            self.send(("refused", registration.key, refusal.host, refusal.port, refusal.reason))

    def released(self, loop: Loop) -> None:
        pass

    def catch_up(self) -> None:
        self._read()

    # the control socket

    def on_event(self, fd: int, mask: int) -> None:
        if mask & WRITE:
            self._flush()
        if mask & READ:
            self._read()

    def send(self, message: tuple[Any, ...]) -> None:
        """Send `message` to the host (in the loop's thread): at once, or as soon as the socket takes it."""
        self._outbox.append(marshal.dumps(message))
        self._flush()

    def _flush(self) -> None:
        while self._outbox:
            try:
                self.control.send(self._outbox[0])
            except (BlockingIOError, InterruptedError):
                break
            except OSError:  # the host is gone: its end of the stream comes with the next read
                self._outbox.clear()
                break
            self._outbox.popleft()
        self.loop.watch(self.control, self, READ | (WRITE if self._outbox else 0))

    def _read(self) -> None:
        while not self.loop.stopping:
            try:
                data, fds, _, _ = socket.recv_fds(self.control, MESSAGE_LIMIT, 1)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data, fds = b"", []
            try:
                if not data:
                    self.end()
                    return
                self._handle(marshal.loads(data), fds)
            finally:
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def _handle(self, message: tuple[Any, ...], fds: list[int]) -> None:
        kind = message[0]
        known: _Registration | None = None
        if kind in ("arm", "taken", "close", "count"):
            known = self.registrations.get(message[1])
        if kind == "register" and fds:
            key, hosts, profile = message[1:4]
            channel = socket.socket(fileno=fds.pop())
            registration = _Registration(self, self.loop, channel, None, tuple(hosts), str(profile))
            registration.key = key
            self.registrations[key] = registration
        elif kind == "arm" and known is not None:
            known.arm()
        elif kind == "taken" and known is not None:
            known.forget_refusals()
        elif kind == "close":
            if known is not None:
                del self.registrations[message[1]]
                known.close()
            self.send(("done", message[2], None))
        elif kind == "count":
            self.send(("done", message[2], known.open_connections() if known is not None else 0))
        elif kind == "mode":
            set_mode(message[1])
            self.send(("done", message[2], None))
        elif kind == "resolver":
            set_resolver(self._ask if message[1] else None)
            self.send(("done", message[2], None))
        elif kind == "cpu":
            self.send(("done", message[1], time.process_time()))
        elif kind == "bye":  # the host's last registration closed: say what it cost, and end
            self.send(("final", time.process_time()))
            self.end()
        elif kind == "found":
            waiter = self._lookups.pop(message[1], None)
            if waiter is not None:
                waiter[1] = message[2] if message[3] is None else str(message[3])
                waiter[0].set()

    def _ask(self, host: str, port: int) -> list[str]:
        """Resolve `host` by asking the host (its `set_resolver`: tests and benchmarks). In a lookup thread."""
        number = next(self._numbers)
        waiter: list[Any] = [threading.Event(), None]
        self._lookups[number] = waiter
        self.loop.call(lambda: self.send(("lookup", number, host, port)))
        if not waiter[0].wait(_LOOKUP_TIMEOUT):
            self._lookups.pop(number, None)
            raise OSError(f"the host did not resolve {host}")
        if isinstance(waiter[1], str):
            raise OSError(waiter[1])
        return list(waiter[1])

    def end(self) -> None:
        """The host is gone or stopped this proxy: every registration closes, the loop stops."""
        for registration in list(self.registrations.values()):
            registration.close()
        self.registrations.clear()
        for waiter in self._lookups.values():
            waiter[1] = "the host is gone"
            waiter[0].set()
        self.loop.stop()


def main(fd: int) -> None:
    """Serve the host at the other end of the control socket `fd` until it ends."""
    server = Server(socket.socket(fileno=fd))
    server.loop.call(lambda: server.send(("ready", os.getpid())))
    server.loop.join()
