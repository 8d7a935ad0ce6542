"""Tell the browser that a widget message was handled while an async cell awaits.

ipywidgets' front end sends a model's next state update only after the kernel's `status: idle`
for the previous one (its message throttle); later updates wait in a buffer. ipykernel 7.4
handles a comm message while an async cell awaits (what makes `await view.run(...)` clickable),
but publishes no status for it, so the browser held every keystroke after the first one of a
text box until the cell ended: a reason typed key by key reached the model as its first
character, and a message to a subagent as its first letter.

`install()` wraps the kernel's `dispatch_shell`: a comm message dispatched alongside a running
cell gets the `idle` status the throttle waits for (parented to that message, as for any other
request), followed by `busy` for the cell that still runs, so JupyterLab's kernel indicator
stays busy. A message handled the ordinary way (no cell running) is left as it was.

It also wraps `process_control`. JupyterLab's widget manager asks for a kernel subshell (a
`create_subshell_request` on the control channel) when a cell shows its first widget; the kernel
answers it with `busy` and `idle`, and JupyterLab's status bar then said *Idle* for the rest of
`await view.run(...)` although the cell still ran. While a cell awaits a run (`cell_awaits()`), a
control message's `idle` is followed by `busy` for that cell.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

__all__ = ["cell_awaits", "install"]

_installed: set[int] = set()
"""ids of the kernels whose `dispatch_shell` is wrapped."""
_awaiting: dict[int, dict[str, Any]] = {}
"""A kernel's id → the request of its cell that awaits a run now."""


@contextlib.contextmanager
def cell_awaits() -> Iterator[None]:
    """While the running cell awaits a run: a control message's `idle` does not leave the kernel shown idle."""
    from IPython.core.getipython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    parent = kernel.get_parent("shell") if kernel is not None and hasattr(kernel, "get_parent") else None
    if not parent:
        yield
        return
    _awaiting[id(kernel)] = parent
    try:
        yield
    finally:
        if _awaiting.get(id(kernel)) is parent:
            del _awaiting[id(kernel)]


def install() -> None:
    """Wrap the running IPython kernel's shell dispatch (once); does nothing outside a kernel."""
    from IPython.core.getipython import get_ipython

    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if kernel is None or id(kernel) in _installed or not hasattr(kernel, "dispatch_shell"):
        return
    _installed.add(id(kernel))
    dispatch = kernel.dispatch_shell

    @functools.wraps(dispatch)
    async def dispatch_shell(msg: Any, /, subshell_id: str | None = None, *, concurrent: bool = False) -> None:
        running = kernel.get_parent("shell") if concurrent else None
        await dispatch(msg, subshell_id=subshell_id, concurrent=concurrent)
        handled = kernel.get_parent("shell")  # dispatch_shell made the comm message the parent here
        if concurrent and handled is not running:
            _status(kernel, "idle", handled)
            _status(kernel, "busy", running)

    kernel.dispatch_shell = dispatch_shell
    if hasattr(kernel, "process_control"):
        process = kernel.process_control

        @functools.wraps(process)
        async def process_control(msg: Any) -> None:
            await process(msg)
            if (cell := _awaiting.get(id(kernel))) is not None:
                _status(kernel, "busy", cell)  # after the control message's idle: the cell still runs

        kernel.process_control = process_control


def _status(kernel: Any, state: str, parent: dict[str, Any] | None) -> None:
    if not parent or kernel.session is None:
        return
    kernel.session.send(kernel.iopub_socket, "status", {"execution_state": state}, parent=parent,
                        ident=f"kernel.{kernel.ident}.status".encode())
