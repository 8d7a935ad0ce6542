"""Process probes shared by the tests: which kernels run under this test process, and whether a PID has ended."""

from __future__ import annotations

import asyncio
import re
import time

import psutil

KERNEL_SOCKET = re.compile(r"freeact-sub-\d+/kernel-[^/]+/run/")
"""Where a kernel binds its sockets (`freeact_sub.sandbox.kernel_folders`)."""


def _is_kernel(process: psutil.Process) -> bool:
    # launched kernels say so on their command line; a kernel forked by the zygote does not,
    # but it binds the ipc sockets in its private folder (`$TMPDIR/freeact-sub-<uid>/kernel-*/run/`)
    if "ipykernel_launcher" in " ".join(process.cmdline()):
        return True
    return any(KERNEL_SOCKET.search(c.laddr or "") is not None for c in process.net_connections(kind="unix"))


def running(script: str) -> set[int]:
    """The processes under this test process (zombies left out) whose command line names `script`."""
    found = set()
    for process in psutil.Process().children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE and script in " ".join(process.cmdline()):
                found.add(process.pid)
        except psutil.Error:
            continue
    return found


def calc_servers() -> set[int]:
    """The calc MCP servers running under this test process."""
    return running("calc_server.")  # the Python or the Node.js one


def kernel_processes() -> list[int]:
    """The IPython kernels running under this test process.

    A process forked by a kernel (a `subprocess` call in a cell, between its fork and its exec) has
    the kernel's command line and inherits its sockets for a moment; it is not a kernel, so only
    processes whose parent is not a kernel count (seen under load: a 4th "kernel" whose parent was one).
    The scan takes a while (each process's sockets are read); a kernel that ended during it is
    left out too, so a kernel killed and its successor started meanwhile are not counted as two at once.
    """
    kernels: dict[int, tuple[psutil.Process, int]] = {}
    for process in psutil.Process().children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE and _is_kernel(process):
                kernels[process.pid] = (process, process.ppid())
        except psutil.Error:
            continue
    return [pid for pid, (process, parent) in kernels.items() if parent not in kernels and _running(process)]


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


async def is_gone(pid: int, wait: float = 5.0) -> bool:
    """Whether the process has ended; one that is exiting gets `wait` seconds. Never reaps it (not ours to reap).

    Async so that the event loop (the agent stopping that process, say) runs while the test waits.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)
