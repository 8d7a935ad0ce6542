"""The host's side of the sandbox's proxy, which runs in a process of its own (`proxy_server`, `proxy_process.py`).

Why a process: in the host's own thread, the proxy shares the interpreter lock with everything else the host runs
in Python (a fan-out's agents, the terminal); each of its ~20 system calls a request then waits for the lock, and a
small request took 6.6x direct with one busy thread beside it (`bench/proxy_alone.py --busy`). In a process of its
own it shares nothing but the cores.

- It starts with the first kernel that registers and stops after the last registration closed (as the in-process
  loop did): a host without a kernel that has a host list never starts it.
- A registration binds the kernel's Unix socket here (so it exists before the kernel starts) and passes it to the
  process (`SCM_RIGHTS`); arming and closing are messages; refusals come back and are logged and kept here, for the
  kernel's `[sandbox]` lines, as before. A test's resolver (`set_resolver`) and relay mode (`set_mode`) are passed
  on; the process asks this one to resolve names while a resolver is set.
- It never outlives the host: it ends at the end of the control socket's stream, which comes when the host stops
  it, exits or is killed (`SIGKILL` too: the kernel closes the host's end). Nothing else holds that end (it is not
  inherited by programs the host starts, and a child forked by the host closes it).
- If it cannot start, the host says so in its log and runs the proxy in a thread of its own (`proxy.Proxy`), as
  `FREEACT_SUB_PROXY=in-process` asks for; a process that died is replaced at the next registration, and a kernel
  registered with it is told in its next cell's `[sandbox]` line and re-registered when it restarts.
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

from .proxy import Proxy, Refusal, Registration, bind_channel, in_process_proxy, log_refusal
from .proxy_request import resolver, watch_resolver
from .relay import current_mode, watch_mode

__all__ = ["PROXY_SCRIPT", "ProxyProcess", "ProxyRegistration", "ProxyUnavailable", "RemoteRegistration", "proxy"]

PROXY_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proxy_process.py")
_MESSAGE_LIMIT = 64 * 1024
_TIMEOUT = 10.0
"""Seconds the host waits for the process to start, to take a message or to answer one."""
_REFUSALS_KEPT = 100
IN_PROCESS = "in-process"
"""`FREEACT_SUB_PROXY=in-process`: the proxy runs in a thread of the host's, not in a process of its own."""

log = logging.getLogger("freeact_sub.sandbox.proxy")


class ProxyUnavailable(RuntimeError):
    """The proxy's process did not start, or ended."""


class ProxyRegistration(Protocol):
    """What a kernel's guard needs of its registration, in either kind of proxy."""

    path: str | None

    def arm(self) -> None: ...

    def refusals(self) -> list[Refusal]: ...

    def close(self) -> None: ...


class _Session:
    """One life of the proxy's process: the process, the host's end of its control socket, and the thread that reads
    what the process sends (its readiness, refusals, answers, lookups) and reaps it at the end.

    Nothing waits for the process to start: messages wait in the socket until it reads them, and a kernel's hand-over
    waits in its Unix socket's queue (the kernel takes longer to boot than the proxy). Until the process says it is
    ready, the host keeps its own copy of each registration's Unix socket, for the in-process proxy to take over if
    the process fails to start (`ProxyProcess.start_failed`)."""

    def __init__(self, owner: ProxyProcess, script: str) -> None:
        host_end, proxy_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", script, str(proxy_end.fileno())],
                pass_fds=(proxy_end.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # the terminal's Ctrl-C is the host's to handle; the proxy ends with it
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
        self.registrations: dict[int, RemoteRegistration] = {}
        self.ready = False
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
        """End the process (the end of its control stream); the reader reaps it."""
        self.stopping = True
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
                    if self.ready:
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

    def _handle(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "ready":
            with self._lock:
                self.ready = True
                kept, self._kept = self._kept, {}
            for channel in kept.values():  # the process holds its own copies now
                channel.close()
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


class RemoteRegistration:
    """A kernel's registration with the proxy's process: the same calls as `proxy.Registration` (which it hands them
    to if the process failed to start: `fall_back`)."""

    def __init__(self, owner: ProxyProcess, path: str, hosts: tuple[str, ...], profile: str) -> None:
        self._owner = owner
        self.path: str | None = path
        self.hosts = hosts
        self.profile = profile
        self.session: _Session | None = None
        self.key = 0
        self.closed = False
        self.delegate: Registration | None = None
        """The in-process proxy's registration that serves this kernel instead (the process failed to start)."""
        self._armed = False
        self._refusals: dict[tuple[str, int], Refusal] = {}
        self._lock = threading.Lock()
        self._lost: int | bool | None = False

    def arm(self) -> None:
        """Take the listening socket of the kernel's next start (one, and none after it); a kernel whose proxy
        process ended registers with a new one here (its restart hands its socket to that one)."""
        with self._lock:
            self._armed = True
            delegate = self.delegate
        if delegate is not None:
            delegate.arm()
            return
        session = self.session
        if session is None or session.ended:
            self._owner.renew(self)
            if self.delegate is not None:
                self.delegate.arm()
                return
            session = self.session
        assert session is not None
        session.send(("arm", self.key))

    def fall_back(self, channel: socket.socket) -> None:
        """Serve this kernel with the in-process proxy through `channel` (its Unix socket, bound at `path`)."""
        with self._lock:
            if self.delegate is not None or self.closed or self.path is None:
                channel.close()
                return
            self.delegate = in_process_proxy().adopt(channel, self.path, self.hosts, self.profile)
            armed = self._armed
        if armed:
            self.delegate.arm()

    def refuse(self, refusal: Refusal) -> None:
        """A refusal the process reported (in the reader's thread)."""
        with self._lock:
            key = (refusal.host, refusal.port)
            if key in self._refusals or len(self._refusals) >= _REFUSALS_KEPT:
                return
            self._refusals[key] = refusal
        log_refusal(self.profile, refusal)

    def lost(self, status: int | None) -> None:
        """Its process ended without being asked to (in the reader's thread)."""
        self._lost = status

    def refusals(self) -> list[Refusal]:
        """The refusals since the last call (each host and port once), and once, that the proxy's process ended."""
        with self._lock:
            taken, self._refusals = list(self._refusals.values()), {}
            lost, self._lost = self._lost, False
        if self.delegate is not None:
            taken += self.delegate.refusals()
        elif taken and self.session is not None:
            with contextlib.suppress(ProxyUnavailable):
                self.session.send(("taken", self.key))
        if lost is not False:
            taken.append(
                Refusal(
                    "",
                    0,
                    f"the sandbox's proxy process ended (status {lost}): this kernel has no network until it restarts",
                )
            )
        return taken

    def open_connections(self) -> int:
        """How many of the kernel's connections are served now."""
        if self.delegate is not None:
            return self.delegate.open_connections()
        if self.session is None:
            return 0
        return int(self.session.request("count", self.key))

    def close(self) -> None:
        """Stop taking connections from this kernel: its listening socket and its connections close (when this
        returns), the Unix socket goes."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        session = self.session
        if self.delegate is not None:
            self.delegate.close()
        elif session is not None:
            with contextlib.suppress(ProxyUnavailable):
                session.request("close", self.key)
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        if session is not None:
            self._owner.released(session, self)


class ProxyProcess:
    """The host's proxy in a process of its own (started with the first registration, stopped after the last), or in
    a thread of the host's where that process cannot start (`script`: the process's entry, for tests)."""

    def __init__(self, script: str = PROXY_SCRIPT) -> None:
        self._script = script
        self._lock = threading.Lock()
        self._session: _Session | None = None
        self._cpu = 0.0
        self.problem: str | None = None
        """Why the process could not start (from then on, registrations go to the in-process proxy)."""
        watch_resolver(self._resolver_changed)
        watch_mode(self._mode_changed)
        os.register_at_fork(after_in_child=self._forget_in_child)

    @property
    def pid(self) -> int | None:
        """The process's PID while it runs."""
        session = self._session
        return session.pid if session is not None and not session.ended else None

    def register(self, path: str, hosts: Iterable[str], profile: str) -> RemoteRegistration | Registration:
        """A kernel's registration: the Unix socket at `path` (in the host's part of the kernel's folder) takes its
        listening socket, and its connections may reach `hosts`. From any thread; it does not wait for the process
        to start."""
        if self.problem is not None:
            return in_process_proxy().register(path, hosts, profile)
        registration = RemoteRegistration(self, path, tuple(hosts), profile)
        try:
            self.renew(registration)
        except ProxyUnavailable as exc:
            self._give_up(str(exc))
            return in_process_proxy().register(path, hosts, profile)
        return registration

    def renew(self, registration: RemoteRegistration) -> None:
        """Register `registration` with the running process (started if none runs, or the last one ended)."""
        assert registration.path is not None
        channel = bind_channel(registration.path)
        if self.problem is not None:
            registration.fall_back(channel)
            return
        for attempt in range(2):
            with self._lock:
                session = self._live_session()
                registration.session, registration.key = session, session.next_key()
                session.registrations[registration.key] = registration
            try:
                session.send(
                    ("register", registration.key, list(registration.hosts), registration.profile), [channel.fileno()]
                )
            except ProxyUnavailable:
                session.registrations.pop(registration.key, None)
                session.ended = True  # the reader says why, as it sees the end
                if attempt:
                    channel.close()
                    raise
                continue
            if not session.keep(registration.key, channel):
                channel.close()  # the process holds it now
            return

    def start_failed(self, session: _Session, why: str, kept: dict[int, socket.socket]) -> None:
        """The process ended before it was ready: its registrations go to the in-process proxy, and so do later ones
        (in the reader's thread)."""
        self._give_up(f"its process did not start: {why}")
        with self._lock:
            if self._session is session:
                self._session = None
        for key, channel in kept.items():
            registration = session.registrations.get(key)
            if registration is not None:
                registration.fall_back(channel)
            else:
                channel.close()

    def released(self, session: _Session, registration: RemoteRegistration) -> None:
        """A registration closed: the process stops after the last."""
        with self._lock:
            if session.registrations.get(registration.key) is registration:
                del session.registrations[registration.key]
            if session.registrations or session is not self._session:
                return
            self._session = None
        if session.ready:
            with contextlib.suppress(ProxyUnavailable):
                self._cpu += float(session.request("cpu"))
        session.stop()

    def cpu_seconds(self) -> float:
        """The CPU time the proxy's processes have used so far (not the in-process proxy's: `Proxy.cpu_seconds`)."""
        session = self._session
        now = 0.0
        if session is not None:
            with contextlib.suppress(ProxyUnavailable):
                now = float(session.request("cpu"))
        return self._cpu + now

    def _give_up(self, why: str) -> None:
        if self.problem is None:
            self.problem = why
            log.warning("the sandbox's proxy runs in a thread of this process, not in a process of its own: %s", why)

    def _live_session(self) -> _Session:
        if self._session is None or self._session.ended:
            self._session = _Session(self, self._script)
            # sent ahead of any registration, read in order by the process: nobody waits for the answers (0)
            if (mode := current_mode()) is not None:
                self._session.send(("mode", mode, 0))
            if resolver() is not None:
                self._session.send(("resolver", True, 0))
        return self._session

    def _resolver_changed(self) -> None:
        session = self._session
        if session is not None:
            with contextlib.suppress(ProxyUnavailable):
                session.request("resolver", resolver() is not None)

    def _mode_changed(self) -> None:
        session = self._session
        if session is not None:
            with contextlib.suppress(ProxyUnavailable):
                session.request("mode", current_mode())

    def _forget_in_child(self) -> None:
        if self._session is not None:
            self._session.forget_in_child()
            self._session = None


_process_proxy: ProxyProcess | None = None
_process_lock = threading.Lock()


def proxy() -> ProxyProcess | Proxy:
    """The host's proxy: in a process of its own, unless `FREEACT_SUB_PROXY=in-process` keeps it in a thread."""
    global _process_proxy
    if os.environ.get("FREEACT_SUB_PROXY") == IN_PROCESS:
        return in_process_proxy()
    with _process_lock:
        if _process_proxy is None:
            _process_proxy = ProxyProcess()
        return _process_proxy
