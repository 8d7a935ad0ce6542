"""`ViewKernels`: kernels booted ahead, each in a copy-on-write view of the working folder of its own.

An isolated child (`isolation: copy-on-write`) cannot take a kernel of the tree's pool: that kernel writes the
folder itself. Forking one for it, with its view mounted, costs the fork and the boot (about 0.45 s) at the
child's start. A `ViewKernels` pool boots such kernels ahead instead, each in a `Workspace` of its own whose upper
layer is empty, and hands one out with its workspace (`Workspace.adopt`): the child's start then costs what a plain
child's does.

Why a view mounted ahead is exact: its upper layer is empty until the child writes (checked at hand-out: a kernel
whose view holds anything is not handed out), and the kernel's boot looks up nothing in the view but the folder
itself, so every file shows as the folder holds it when the child starts, not when the view was mounted. The
child's base, and the time after which a folder change is a possible conflict, are the hand-out's
(`tests/integration/test_workspace_pool.py` changes, replaces, adds and removes files between the boot and the
hand-out and checks both).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..kernels.backends import KernelBackend
from ..kernels.pool import KernelPool
from ..sandbox import kernel_folders
from ..workspaces import Workspace

__all__ = ["ViewKernels"]

_TRIES = 3
"""Pooled kernels looked at per hand-out before one is booted for the caller alone."""


class ViewKernels:
    """A `KernelPool` of kernels each booted in a copy-on-write view of `lower` of its own.

    `make(view)` makes the (unstarted) kernel for a view. A kernel the pool shuts down itself takes its view's
    folders with it; one handed out gives them to the child's workspace, which removes them when its change set
    was decided.
    """

    def __init__(self, make: Callable[[Workspace], KernelBackend], lower: Path, size: int) -> None:
        self._make = make
        self._lower = lower
        self._views: dict[int, Workspace] = {}
        self.pool = KernelPool(self._new_kernel, size, discarded=self._discarded)

    def _new_kernel(self) -> KernelBackend:
        view = Workspace.create(kernel_folders.create(kernel_folders.WORKSPACE_PREFIX), self._lower)
        try:
            kernel = self._make(view)
        except BaseException:
            view.remove()
            raise
        self._views[id(kernel)] = view
        return kernel

    def _discarded(self, kernel: KernelBackend) -> None:
        view = self._views.pop(id(kernel), None)
        if view is not None:
            view.remove()

    async def acquire(self, workspace: Workspace) -> KernelBackend:
        """A started kernel whose working folder is a view of its own, the view's folders now `workspace`'s.

        If none is ready, one is booted for this caller (what a fork for it would cost). A pooled kernel whose view
        holds anything already, or of another folder, is shut down and the next one taken.
        """
        for _ in range(_TRIES):
            kernel = await self.pool.acquire()
            view = self._views.pop(id(kernel), None)
            try:
                usable = view is not None and view.lower == workspace.lower and not view.written()
            except OSError:
                usable = False
            if usable and view is not None:
                workspace.adopt(view)
                return kernel
            try:
                await kernel.shutdown(now=True)
            finally:
                if view is not None:
                    view.remove()
        raise RuntimeError(f"no kernel with a clean copy-on-write view of {workspace.lower} after {_TRIES} tries")

    def expect(self, callers: int) -> None:
        """`callers` isolated children will ask soon: keep as many views ready (see `KernelPool.expect`)."""
        self.pool.expect(callers)

    def fill(self) -> None:
        """Top the pool up to its size (and the callers expected)."""
        self.pool.fill()

    async def close(self) -> None:
        """Stop the kernels booting and shut down those not handed out, their views' folders with them."""
        await self.pool.close()
