"""The host's side of one sandboxed kernel's hosts and limits: its way to the proxy, its cgroups, its time
per cell, and the `[sandbox]` lines a cell gets when one of them refused it something.

`Kernel` holds one `KernelGuard` from its start to its shutdown (restarts included).
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

from .limits import KernelCgroup, format_bytes
from .proxy import PROXY_PORT, Registration, proxy, proxy_environment

__all__ = ["KernelGuard"]

_MEMORY_ERRORS = re.compile(r"MemoryError|Cannot allocate memory|\[Errno 12\]|std::bad_alloc")
_PROCESS_ERRORS = re.compile(r"Resource temporarily unavailable|\[Errno 11\]|can't start new thread|"
                             r"BlockingIOError")


class KernelGuard:
    """Hosts and limits of one kernel (`plan`: its profile's plan, as `SandboxProfile.plan` makes it)."""

    def __init__(self, plan: dict[str, Any], folder: str) -> None:
        self.profile = str(plan.get("profile", "custom"))
        limits = plan.get("limits") or {}
        self.memory: int | None = limits.get("memory")
        self.processes: int | None = limits.get("processes")
        self.cell_time: float | None = limits.get("cell_time")
        network = plan.get("network", True)
        self.registration: Registration | None = None
        if isinstance(network, list):
            # in the host's part of the kernel's folder: the kernel sees it but can make no socket to reach it
            self.registration = proxy().register(os.path.join(folder, "proxy.sock"), network, self.profile)
        self.group = KernelCgroup(self.processes, self.memory)
        self._memory_kills = 0

    def environment(self) -> dict[str, str]:
        """Variables the kernel starts with: its HTTP clients go through the proxy."""
        return proxy_environment() if self.registration is not None else {}

    def confine(self, plan: dict[str, Any]) -> dict[str, Any]:
        """`plan` for this (re)start: the proxy's socket, armed for one hand-over."""
        plan = dict(plan)
        if self.registration is not None:
            self.registration.arm()
            plan["proxy"] = {"socket": self.registration.path, "port": PROXY_PORT}
        return plan

    async def attach(self, pid: int | None) -> None:
        """Move the kernel process `pid` into its cgroups (where there are some), while it boots: the host does it
        (a cgroup move waits for the kernel's RCU, 7-25 ms measured here, which would otherwise add to every spawn),
        and the kernel's first cell waits for it (`Kernel.start`). Its threads move with it; it has made no child
        process yet."""
        if self.group.paths and pid is not None:
            await asyncio.to_thread(self.group.attach, pid)

    def timeout(self, timeout: float | None) -> tuple[float | None, bool]:
        """The time a cell may run, and whether the profile's `cell_time` is what sets it."""
        if self.cell_time is not None and (timeout is None or self.cell_time <= timeout):
            return self.cell_time, True
        return timeout, False

    def notices(self, text: str, status: str, timed_by_profile: bool) -> list[str]:
        """The `[sandbox]` lines for a cell that ended with `text` and `status`."""
        lines = []
        if self.registration is not None:
            seen: set[tuple[str, int]] = set()
            for refusal in self.registration.refusals():
                if (refusal.host, refusal.port) in seen:
                    continue
                seen.add((refusal.host, refusal.port))
                where = f"to {refusal.host}:{refusal.port}" if refusal.port else "to the sandbox's proxy"
                lines.append(f"[sandbox] A network connection {where} was refused under the sandbox profile "
                             f"{self.profile!r}: {refusal.reason}.")
        if status == "timeout" and timed_by_profile:
            lines.append(f"[sandbox] This cell ran past the time limit of the profile {self.profile!r} "
                         f"(cell_time: {self.cell_time:g} s) and was stopped.")
        if self.memory is not None and (kills := self.group.memory_kills()) > self._memory_kills:
            self._memory_kills = kills
            lines.append(f"[sandbox] The profile {self.profile!r} limits this kernel's processes together to "
                         f"{format_bytes(self.memory)} of memory (memory); past it one of them was stopped"
                         + (", the kernel itself: it was restarted, its variables are gone." if status == "kernel_died"
                            else "."))
        elif self.memory is not None and _MEMORY_ERRORS.search(text):
            lines.append(f"[sandbox] The profile {self.profile!r} limits each process of this kernel to "
                         f"{format_bytes(self.memory)} of memory (memory); an allocation past it fails.")
        if self.processes is not None and _PROCESS_ERRORS.search(text):
            lines.append(f"[sandbox] The profile {self.profile!r} limits this kernel to {self.processes} processes "
                         f"and threads (processes); starting one more fails.")
        return lines

    def close(self) -> None:
        if self.registration is not None:
            self.registration.close()
        self.group.close()
