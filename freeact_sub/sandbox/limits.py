"""Limits per agent: the memory, processes and time a kernel may take, and how a child's are derived.

Enforced by the operating system, in the kernel (`enforce.apply`), before any of its code runs:
- `memory`: `RLIMIT_DATA` of every process of the kernel (hard and soft: it cannot raise it), so an allocation past
  it fails in that process (`MemoryError` in Python) and the kernel lives on; and, where the host can make one,
  a memory cgroup of the kernel's own holding all its processes together, shared memory included (past it the
  OOM killer ends one of them, the kernel itself maybe: it is then restarted). Not `RLIMIT_AS`: address space a
  runtime only reserves counts there (Node's WebAssembly failed at 8 GiB, Java at 2 GiB), and it is no memory.
- `processes`: a pids cgroup of the kernel's own where the host can make one (root, or a delegated cgroup v2
  tree; the host moves the kernel in before its first cell), and `RLIMIT_NPROC` always, set inside the kernel's
  user namespace, where Linux counts the user's processes per namespace (it does not apply it to uid 0: as root,
  only the cgroup holds).
- `cell_time`: wall-clock seconds per cell, kept by the host (it interrupts the cell, then restarts a kernel that
  does not stop). CPU time per cell is not enforceable from inside: `RLIMIT_CPU` counts a process's whole life,
  not a cell, and a cell waiting on a socket or a child spends none.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import signal
import threading
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

__all__ = ["DEFAULT_LIMITS", "KernelCgroup", "Limits", "format_bytes", "limit_gaps", "limits_meet", "parse_bytes"]

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
          "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "t": 1000**4, "tb": 1000**4, "tib": 1024**4}


def parse_bytes(value: Any) -> int | None:
    """`"2GiB"`, `"512 MB"`, `2147483648` as bytes; None for None (no limit)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value)
        if match and match.group(2).lower() in _UNITS:
            return int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    raise ValueError(f"{value!r} is not an amount of memory (such as \"2GiB\" or \"512MB\")")


def format_bytes(amount: int) -> str:
    """`2 GiB`, `512 MiB`."""
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if amount >= size:
            return f"{amount / size:.4g} {unit}"
    return f"{amount} B"


def _default_memory() -> int:
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        physical = 16 * 1024**3
    return max(1024**3, min(8 * 1024**3, physical // 2))


class Limits(BaseModel):
    """What one agent's kernel may take (None: no limit of its own); a field left out keeps its default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory: int | None = _default_memory()
    """Bytes of address space each process of the kernel may map (`"2GiB"`, `"512MB"`)."""
    processes: int | None = 256
    """Processes and threads the kernel may run at once (itself included)."""
    cell_time: float | None = None
    """Wall-clock seconds one cell may run before it is interrupted (the tree's `execution_timeout` applies too)."""

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> int | None:
        amount = parse_bytes(value)
        if amount is not None and amount < 256 * 1024**2:
            raise ValueError("memory below 256 MiB leaves no room for the kernel itself")
        return amount

    @field_validator("processes")
    @classmethod
    def _processes(cls, value: int | None) -> int | None:
        if value is not None and value < 8:
            raise ValueError("processes below 8 leave no room for the kernel's own threads")
        return value

    def describe(self) -> str:
        """`memory 4 GiB, 256 processes, 60 s a cell` (empty when none is set)."""
        parts = []
        if self.memory is not None:
            parts.append(f"memory {format_bytes(self.memory)}")
        if self.processes is not None:
            parts.append(f"{self.processes} processes")
        if self.cell_time is not None:
            parts.append(f"{self.cell_time:g} s a cell")
        return ", ".join(parts)

    def plan(self) -> dict[str, Any]:
        """The part `enforce.apply` takes (`cell_time` is the host's)."""
        return {"memory": self.memory, "processes": self.processes, "cell_time": self.cell_time}


DEFAULT_LIMITS = Limits()
"""Every enforced profile's unless it says otherwise: each process at most half the machine's memory (at most 8
GiB), 256 processes and threads; no time limit of its own (the tree's `execution_timeout`, 300 s, applies)."""


def limits_meet(parent: Limits, child: Limits) -> Limits:
    """A child's limits: each the smaller of its parent's and its type's (None counts as no limit)."""
    def smaller(a: Any, b: Any) -> Any:
        return b if a is None else a if b is None else min(a, b)

    return Limits(memory=smaller(parent.memory, child.memory), processes=smaller(parent.processes, child.processes),
                  cell_time=smaller(parent.cell_time, child.cell_time))


_counter = itertools.count()


class KernelCgroup:
    """Cgroups of one kernel's own, made by the host where it may make them: `pids` (`processes`) and `memory`
    (all the kernel's processes together, shared memory included). `paths` holds one folder per hierarchy made
    (cgroup v1 has one per controller, v2 one for both); empty where the host may make none.

    The host moves the kernel into them before the kernel runs any cell (`attach`); Landlock keeps the kernel from
    writing any cgroup file, so it cannot leave. Removed with `close()` once the kernel's processes are gone.
    """

    def __init__(self, processes: int | None, memory: int | None) -> None:
        self.paths: dict[str, str] = {}
        """Controller -> the kernel's cgroup folder for it."""
        name = f"freeact-sub-{os.getpid()}-{next(_counter)}"
        for controller, setting, value in (("pids", "pids.max", processes),
                                           ("memory", "memory.max", memory)):
            if value is None or (base := _cgroup_base(controller)) is None:
                continue
            folder, version = base
            path = os.path.join(folder, name)
            if version == 1 and controller == "memory":
                setting = "memory.limit_in_bytes"
            try:
                if path not in self.paths.values():
                    os.mkdir(path, 0o755)
                with open(os.path.join(path, setting), "w") as file:
                    file.write(str(value))
            except OSError:
                continue
            self.paths[controller] = path

    @property
    def path(self) -> str | None:
        """The `pids` cgroup's folder (None: `processes` rests on `RLIMIT_NPROC` alone)."""
        return self.paths.get("pids")

    def attach(self, pid: int) -> None:
        """Move the process `pid` (and its threads) into the cgroups."""
        for path in dict.fromkeys(self.paths.values()):
            with open(os.path.join(path, "cgroup.procs"), "w") as procs:
                procs.write(str(pid))

    def memory_kills(self) -> int:
        """How often the memory cgroup's limit made the kernel's OOM killer end one of its processes."""
        path = self.paths.get("memory")
        if path is None:
            return 0
        for name in ("memory.events", "memory.oom_control"):
            try:
                with open(os.path.join(path, name)) as file:
                    for line in file:
                        key, _, value = line.partition(" ")
                        if key == "oom_kill":
                            return int(value)
            except (OSError, ValueError):
                continue
        return 0

    def close(self) -> None:
        """Remove the cgroups once the kernel is gone: what it left running in them is killed, and one whose last
        process is still exiting is removed by a thread that tries again for a few seconds."""
        paths, self.paths = list(dict.fromkeys(self.paths.values())), {}
        for path in paths:
            try:
                os.rmdir(path)
            except OSError:
                threading.Thread(target=_remove_when_empty, args=(path,), name="freeact-sub-cgroup",
                                 daemon=True).start()


def _remove_when_empty(path: str, wait: float = 10.0) -> None:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            with open(os.path.join(path, "cgroup.procs")) as procs:
                left = [int(pid) for pid in procs.read().split()]
        except OSError:
            return
        for pid in left:  # the kernel's own processes, left behind by it (a daemon it started)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.rmdir(path)
            return
        except OSError:
            time.sleep(0.05)


def limit_gaps(limits: Limits) -> list[str]:
    """What of `limits` this machine cannot enforce: `processes` as root without a pids cgroup to make, and shared
    memory without a memory cgroup to make (`RLIMIT_DATA` counts a process's private memory only)."""
    gaps = []
    if limits.processes is not None and os.getuid() == 0 and _cgroup_base("pids") is None:
        gaps.append("processes (running as root, where Linux ignores RLIMIT_NPROC, and no pids cgroup to make)")
    if limits.memory is not None and _cgroup_base("memory") is None:
        gaps.append("shared memory past the memory limit (no memory cgroup to make)")
    return gaps


@functools.cache
def _cgroup_base(controller: str) -> tuple[str, int] | None:
    """This process's cgroup folder for `controller` that may take a child, and the cgroup version; or None."""
    try:
        with open("/proc/self/cgroup") as file:
            lines = file.read().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):  # cgroup v1: a hierarchy per controller
            folder = os.path.join("/sys/fs/cgroup", controller, path.lstrip("/"))
            return (folder, 1) if os.access(folder, os.W_OK) else None
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":  # cgroup v2: the controller must be on for children
            folder = os.path.join("/sys/fs/cgroup", path.lstrip("/"))
            try:
                with open(os.path.join(folder, "cgroup.subtree_control")) as control:
                    enabled = control.read().split()
            except OSError:
                return None
            return (folder, 2) if controller in enabled and os.access(folder, os.W_OK) else None
    return None
