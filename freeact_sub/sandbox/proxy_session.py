"""One life of the sandbox's proxy process, seen from the host: the process, the host's end of its control socket
(`proxy_server` has the messages), and the thread that reads what the process sends and reaps it at the end.
`proxy_client.ProxyProcess` starts one with the first registration and stops it after the last.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import marshal
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterable
from typing import Any, Protocol

from .proxy import Refusal
from .proxy_request import resolver

__all__ = ["PROXY_SCRIPT", "ProxyUnavailable", "Session"]

PROXY_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proxy_process.py")
"""The process's entry, run by its path (`proxy_process.py`)."""
_MESSAGE_LIMIT = 64 * 1024
_TIMEOUT = 10.0
"""Seconds the host waits for the process to start, to take a message or to answer one."""

log = logging.getLogger("freeact_sub.sandbox.proxy")


class ProxyUnavailable(RuntimeError):
    """The proxy's process did not start, or ended."""


class Member(Protocol):
    """A kernel's registration, as its session sees it (`proxy_client.RemoteRegistration`)."""

    def refuse(self, refusal: Refusal) -> None: ...

    def lost(self, status: int | None) -> None: ...


class Owner(Protocol):
    """Who started the session (`proxy_client.ProxyProcess`)."""

    def start_failed(self, session: Session, why: str, kept: dict[int, socket.socket]) -> None: ...

    def finished(self, session: Session) -> None: ...


class Session:
    """One life of the proxy's process: the process, the host's end of its control socket, and the thread that reads
    what the process sends (its readiness, refusals, answers, lookups) and reaps it at the end.

    Nothing waits for the process to start: messages wait in the socket until it reads them, and a kernel's hand-over
    waits in its Unix socket's queue (the kernel takes longer to boot than the proxy). Until the process says it is
    ready, the host keeps its own copy of each registration's Unix socket, for the in-process proxy to take over if
    the process fails to start (`ProxyProcess.start_failed`)."""

    def __init__(self, owner: Owner, script: str) -> None:
        host_end, proxy_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", script, str(proxy_end.fileno())],
                pass_fds=(proxy_end.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                # the host's session and process group (it ignores the terminal's Ctrl-C): a session of its own put it
                # in a scheduling group of its own (autogroup), and a small request took 2.9x direct against 2.0x
            )
        except OSError as exc:
            host_end.close()
            raise ProxyUnavailable(f"the sandbox's proxy process could not be started: {exc}") from exc
        finally:
            proxy_end.close()
        # a send to a process that takes nothing for this long fails; the reader's receive goes on waiting
        host_end.settimeout(_TIMEOUT)
        self._owner = owner
        self.control = host_end
        self.pid = self.process.pid
        self.registrations: dict[int, Any] = {}
        """Its registrations by key (`Member`s)."""
        self.ready = False
        self.started = threading.Event()
        """Set when the process said it is ready, or ended."""
        self.cpu = 0.0
        """The process's CPU seconds, as it said when it ended (`bye`)."""
        self.finished = threading.Event()
        """Set once it ended and was reaped."""
        self.ended = False
        self.stopping = False
        self._kept: dict[int, socket.socket] = {}
        self._lock = threading.Lock()
        self._keys = itertools.count(1)
        self._replies: dict[int, list[Any]] = {}
        self._send_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="freeact-sub-proxy-control", daemon=True)
        self._reader.start()

    def next_key(self) -> int:
        return next(self._keys)

    def keep(self, key: int, channel: socket.socket) -> bool:
        """Keep the host's copy of a registration's Unix socket until the process is ready; False: it is (the caller
        closes it)."""
        with self._lock:
            if self.ready or self.ended:
                return False
            self._kept[key] = channel
            return True

    def send(self, message: tuple[Any, ...], fds: Iterable[int] = ()) -> None:
        if self.ended:
            raise ProxyUnavailable("the sandbox's proxy process ended")
        try:
            with self._send_lock:
                socket.send_fds(self.control, [marshal.dumps(message)], list(fds))
        except OSError as exc:  # ended, or it has taken nothing for `_TIMEOUT`
            raise ProxyUnavailable(f"the sandbox's proxy process ended or is stuck ({exc})") from exc

    def request(self, *message: Any) -> Any:
        """Send `message` with a number and wait for the answer to it."""
        number = self.next_key()
        waiter: list[Any] = [threading.Event(), None]
        self._replies[number] = waiter
        try:
            self.send((*message, number))
            if not waiter[0].wait(_TIMEOUT):
                raise ProxyUnavailable("the sandbox's proxy process did not answer")
        finally:
            self._replies.pop(number, None)
        if isinstance(waiter[1], ProxyUnavailable):
            raise waiter[1]
        return waiter[1]

    def stop(self) -> None:
        """End the process: it says what it cost and ends (the end of its control stream if it does not take the
        message); the reader reaps it. Nobody waits."""
        self.stopping = True
        try:
            self.send(("bye",))
        except ProxyUnavailable:
            with contextlib.suppress(OSError):
                self.control.shutdown(socket.SHUT_RDWR)

    def forget_in_child(self) -> None:
        """In a child the host forked: let go of the control socket, whose end must mean the host's."""
        with contextlib.suppress(OSError):
            os.close(self.control.detach())

    def _read(self) -> None:
        why = "it exited"
        try:
            while True:
                try:
                    data = self.control.recv(_MESSAGE_LIMIT)
                except TimeoutError:
                    if self.ready and not self.stopping:
                        continue
                    why = f"it did not answer in {_TIMEOUT:g} s"
                    return
                except OSError as exc:
                    why, data = str(exc), b""
                if not data:
                    return
                try:
                    message = marshal.loads(data)
                    if message[0] == "failed":
                        why = str(message[1])
                        return
                    self._handle(message)
                except Exception as exc:  # one odd message never stops the others
                    log.debug("sandbox proxy: message not handled: %r", exc)
        finally:
            with self._lock:
                self.ended = True
                kept, self._kept = self._kept, {}
            self.started.set()
            for waiter in list(self._replies.values()):
                waiter[1] = ProxyUnavailable("the sandbox's proxy process ended")
                waiter[0].set()
            status = self._end_process()
            if not self.ready and not self.stopping:
                self._owner.start_failed(self, f"{why} (status {status})", kept)
            elif not self.ready:
                for channel in kept.values():
                    channel.close()
            elif not self.stopping:
                log.warning(
                    "the sandbox's proxy process %s ended (status %s): its kernels have no network until they restart",
                    self.pid,
                    status,
                )
                for registration in list(self.registrations.values()):
                    registration.lost(status)
            self._owner.finished(self)
            self.finished.set()

    def _handle(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "ready":
            with self._lock:
                self.ready = True
                kept, self._kept = self._kept, {}
            self.started.set()
            for channel in kept.values():  # the process holds its own copies now
                channel.close()
        elif kind == "final":
            self.cpu = float(message[1])
        elif kind == "done":
            waiter = self._replies.get(message[1])
            if waiter is not None:
                waiter[1] = message[2]
                waiter[0].set()
        elif kind == "refused":
            registration = self.registrations.get(message[1])
            if registration is not None:
                registration.refuse(Refusal(str(message[2]), int(message[3]), str(message[4])))
        elif kind == "lookup":
            number, host, port = message[1:4]
            chosen = resolver()
            try:
                if chosen is None:
                    found = [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]
                else:
                    found = list(chosen(host, port))
                answer: tuple[Any, ...] = ("found", number, found, None)
            except Exception as exc:
                answer = ("found", number, None, str(exc) or type(exc).__name__)
            with contextlib.suppress(ProxyUnavailable):
                self.send(answer)

    def _end_process(self) -> int | None:
        with contextlib.suppress(OSError):
            self.control.close()
        try:
            return self.process.wait(5)
        except subprocess.TimeoutExpired:  # it should have ended with its stream: by its PID, ours
            self.process.kill()
            return self.process.wait()
