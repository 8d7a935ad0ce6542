"""Moving a proxied connection's bytes: `relay` both ways with `splice` (the kernel copies them, not Python), and
`Workers`, the count of threads that serve one kernel's connections (at most `MAX_CONNECTIONS`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import threading
import time
from collections.abc import Callable

__all__ = ["MAX_CONNECTIONS", "Workers", "relay"]

MAX_CONNECTIONS = 256
"""Connections one kernel may have open through the proxy at once (each holds a thread of the host's, a tunnel
two); one more waits until one ends."""
_CHUNK = 1 << 20
_IDLE_WORKERS = 4
_F_SETPIPE_SZ = 1031


class Workers:
    """How many threads serve one listening socket, and how many of them wait for a connection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.workers = self.idle = 1  # the first one, about to start

    def taken(self) -> bool:
        """A worker took a connection; True if it should start another (none would be left waiting)."""
        with self._lock:
            self.idle -= 1
            if self.idle > 0 or self.workers >= MAX_CONNECTIONS:
                return False
            self.workers += 1
            self.idle += 1
            return True

    def freed(self) -> bool:
        """A worker is done with its connection; False if it should end (enough are waiting)."""
        with self._lock:
            if self.idle >= _IDLE_WORKERS:
                return False
            self.idle += 1
            return True

    def ended(self) -> None:
        with self._lock:
            self.workers -= 1


def relay(client: socket.socket, upstream: socket.socket, spent: Callable[[float], None], *,
           both_ways: bool = True) -> None:
    """Bytes both ways until both sides are done: upstream to client here, client to upstream in a second thread
    (not for a request without a body: then nothing more of the client's goes anywhere)."""
    if not both_ways:
        _splice(upstream, client)
        return

    def send() -> None:
        began = time.thread_time()
        _splice(client, upstream)
        spent(time.thread_time() - began)

    sending = threading.Thread(target=send, daemon=True)
    sending.start()
    _splice(upstream, client)
    sending.join()


def _splice(source: socket.socket, target: socket.socket) -> None:
    """Move bytes from `source` to `target` through a pipe, in the kernel (no copy through Python)."""
    read_end, write_end = os.pipe()
    with contextlib.suppress(OSError):  # a larger pipe moves a download in fewer calls (1 MiB: any user may)
        fcntl.fcntl(write_end, _F_SETPIPE_SZ, _CHUNK)
    try:
        while True:
            moved = os.splice(source.fileno(), write_end, _CHUNK, flags=getattr(os, "SPLICE_F_MOVE", 1))
            if moved == 0:
                break
            while moved:
                moved -= os.splice(read_end, target.fileno(), moved, flags=getattr(os, "SPLICE_F_MOVE", 1))
    except OSError:
        pass
    finally:
        os.close(read_end)
        os.close(write_end)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            source.shutdown(socket.SHUT_RD)
