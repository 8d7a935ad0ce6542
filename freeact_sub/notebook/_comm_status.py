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
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["install"]

_installed: set[int] = set()
"""ids of the kernels whose `dispatch_shell` is wrapped."""


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


def _status(kernel: Any, state: str, parent: dict[str, Any] | None) -> None:
    if not parent or kernel.session is None:
        return
    kernel.session.send(kernel.iopub_socket, "status", {"execution_state": state}, parent=parent,
                        ident=f"kernel.{kernel.ident}.status".encode())
