"""The host's side of the sandbox's proxy, which runs in a process of its own (`proxy_process.py`, `proxy_server`).

Why a process: in the host's own thread, the proxy shares the interpreter lock with everything else the host runs
in Python (a fan-out's agents, the terminal); each of its ~20 system calls a request then waits for the lock, and a
small request took 6.6x direct with one busy thread beside it (`bench/proxy_alone.py --busy`). In a process of its
own it shares nothing with the host but the cores.

- It starts with the first kernel that registers and stops after the last registration closed (as the in-process
  loop did): a host whose kernels have no host list never starts it. Nobody waits for it to start (`Session`).
- A registration binds the kernel's Unix socket here (so it exists before the kernel starts) and passes it to the
  process (`SCM_RIGHTS`); arming and closing are messages; refusals come back and are logged and kept here, for the
  kernel's `[sandbox]` lines, as before. A test's resolver (`set_resolver`) and relay mode (`set_mode`) are passed
  on; the process asks this one to resolve names while a resolver is set.
- It never outlives the host: it ends at the end of the control socket's stream, which comes when the host stops
  it, exits or is killed (`SIGKILL` too: Linux closes the host's end). Nothing else holds that end (it is not
  inherited by programs the host starts, and a child forked by the host closes it).
- If it cannot start, the host says so in its log and runs the proxy in a thread of its own (`proxy.Proxy`, which
  takes over the registrations made meanwhile), as `FREEACT_SUB_PROXY=in-process` asks for from the start. A process
  that died after it started is replaced at the next registration; a kernel registered with it is told in its next
  cell's `[sandbox]` line and registers with the new one as it restarts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Iterable
from typing import Protocol

from .proxy import Proxy, Refusal, Registration, bind_channel, in_process_proxy, log_refusal
from .proxy_request import resolver, watch_resolver
from .proxy_session import PROXY_SCRIPT, ProxyUnavailable, Session
from .relay import current_mode, watch_mode

__all__ = ["PROXY_SCRIPT", "ProxyProcess", "ProxyRegistration", "ProxyUnavailable", "RemoteRegistration", "proxy"]

_REFUSALS_KEPT = 100
_FINAL_WAIT = 5.0
IN_PROCESS = "in-process"
"""`FREEACT_SUB_PROXY=in-process`: the proxy runs in a thread of the host's, not in a process of its own."""

log = logging.getLogger("freeact_sub.sandbox.proxy")


class ProxyRegistration(Protocol):
    """What a kernel's guard needs of its registration, in either kind of proxy."""

    path: str | None

    def arm(self) -> None: ...

    def refusals(self) -> list[Refusal]: ...

    def close(self) -> None: ...


class RemoteRegistration:
    """A kernel's registration with the proxy's process: the same calls as `proxy.Registration` (which it hands them
    to if the process failed to start: `fall_back`)."""

    def __init__(self, owner: ProxyProcess, path: str, hosts: tuple[str, ...], profile: str) -> None:
        self._owner = owner
        self.path: str | None = path
        self.hosts = hosts
        self.profile = profile
        self.session: Session | None = None
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
        """Stop taking connections from this kernel: its listening socket and its connections close (as the process
        reads this, in order after everything sent before), the Unix socket goes."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        session = self.session
        if self.delegate is not None:
            self.delegate.close()
        elif session is not None:
            # nobody waits: the kernel is gone by now, the process closes what it served of it at once
            with contextlib.suppress(ProxyUnavailable):
                session.send(("close", self.key, 0))
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
        self._session: Session | None = None
        self._cpu = 0.0
        self._stopping: set[Session] = set()
        """Processes stopped that have not ended yet (their CPU time is not counted yet)."""
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

    def start_failed(self, session: Session, why: str, kept: dict[int, socket.socket]) -> None:
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

    def released(self, session: Session, registration: RemoteRegistration) -> None:
        """A registration closed: the process stops after the last."""
        with self._lock:
            if session.registrations.get(registration.key) is registration:
                del session.registrations[registration.key]
            if session.registrations or session is not self._session:
                return
            self._session = None
            self._stopping.add(session)
        session.stop()

    def cpu_seconds(self) -> float:
        """The CPU time the proxy's processes have used so far (not the in-process proxy's: `Proxy.cpu_seconds`)."""
        session = self._session
        now = 0.0
        if session is not None and not session.ended:
            with contextlib.suppress(ProxyUnavailable):
                now = float(session.request("cpu"))
        for stopping in list(self._stopping):  # stopped a moment ago: its last word (its CPU) is on its way
            stopping.finished.wait(_FINAL_WAIT)
        return self._cpu + now

    def finished(self, session: Session) -> None:
        """A process ended and was reaped (in its reader's thread)."""
        with self._lock:
            self._cpu += session.cpu
            self._stopping.discard(session)

    def wait_started(self, timeout: float = 10.0) -> bool:
        """Wait until the running process said it is ready (for benchmarks and tests); False: none runs, or it ended
        first."""
        session = self._session
        return session is not None and session.started.wait(timeout) and session.ready and not session.ended

    def _give_up(self, why: str) -> None:
        if self.problem is None:
            self.problem = why
            log.warning("the sandbox's proxy runs in a thread of this process, not in a process of its own: %s", why)

    def _live_session(self) -> Session:
        if self._session is None or self._session.ended:
            self._session = Session(self, self._script)
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
