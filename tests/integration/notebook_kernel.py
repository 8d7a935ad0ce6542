"""Drive a notebook kernel the way JupyterLab does, without a browser.

Cells go to the kernel on the shell channel; widget state is collected from the `comm_open` /
`comm_msg` messages on iopub, as a browser's widget manager collects it; a button click is the
same `comm_msg` a browser sends (`{"method": "custom", "content": {"event": "click"}}`), and a
toggle is a state update (`{"method": "update", "state": {"value": true}}`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jupyter_client import AsyncKernelManager

from tests.cli_fork import ForkedKernelManager


class CellError(AssertionError):
    """A cell raised in the kernel."""


class NotebookKernel:
    """A real IPython kernel (the notebook's own), started in `cwd` with `env`.

    It is forked by the tests' fork server (`tests.cli_fork.kernel_spec_folder`), its libraries imported already;
    `forked=False` starts a fresh interpreter (what a test of what the kernel imports, and from where, needs).
    """

    def __init__(self, cwd: Path, env: Mapping[str, str] | None = None, *, forked: bool = True) -> None:
        self.cwd = cwd
        self.env = dict(os.environ if env is None else env)
        self.models: dict[str, dict[str, Any]] = {}
        """Widget state by model id, as a front end holds it."""
        self.printed: dict[str, str] = {}
        """What each cell (by request id) printed."""
        self.displayed: dict[str, list[dict[str, Any]]] = {}
        """The MIME bundles each cell (by request id) displayed, its value included."""
        self._idle: set[str] = set()
        self.statuses: list[tuple[str, str]] = []
        """Every `status` message: (execution state, the request it is about)."""
        self._errors: dict[str, str] = {}
        manager = ForkedKernelManager if forked else AsyncKernelManager
        self._manager = manager(kernel_name="python3")
        self._client: Any = None

    async def __aenter__(self) -> NotebookKernel:
        await self._manager.start_kernel(cwd=str(self.cwd), env=self.env)
        self._client = self._manager.client()
        self._client.start_channels()
        await self._client.wait_for_ready(timeout=60)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._client is not None:
            self._client.stop_channels()
        await self._manager.shutdown_kernel(now=False)

    # -- cells ------------------------------------------------------------------------------

    def execute(self, code: str) -> str:
        """Send a cell and return its request id at once (the cell may run for a long time)."""
        return str(self._client.execute(code))

    async def run(self, code: str, limit: float = 120.0) -> str:
        """Run a cell to its end and return what it printed."""
        request = self.execute(code)
        await self.until(lambda: self.finished(request), f"the cell {code[:60]!r} to finish", limit)
        return self.printed.get(request, "")

    def finished(self, request: str) -> bool:
        """Whether the cell sent as `request` has ended; raises if it failed."""
        if request in self._errors:
            raise CellError(self._errors[request])
        return request in self._idle

    async def until(self, condition: Callable[[], Any], what: str, limit: float = 120.0) -> Any:
        """Read iopub until `condition()` is truthy; returns its value. The limit turns a hang into a failure."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while not (value := condition()):
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"gave up waiting for {what}")
            try:
                message = await self._client.get_iopub_msg(timeout=min(remaining, 0.5))
            except Exception:  # queue.Empty: nothing arrived yet
                continue
            self._take(message)
        return value

    def _take(self, message: dict[str, Any]) -> None:
        kind, content = message["msg_type"], message["content"]
        request = message.get("parent_header", {}).get("msg_id", "")
        if kind == "comm_open" and content.get("target_name") == "jupyter.widget":
            self.models[content["comm_id"]] = dict(content["data"].get("state", {}))
        elif kind == "comm_msg" and content["comm_id"] in self.models:
            data = content["data"]
            if data.get("method") in ("update", "echo_update"):
                self.models[content["comm_id"]].update(data.get("state", {}))
        elif kind in ("display_data", "execute_result"):
            self.displayed.setdefault(request, []).append(content["data"])
        elif kind == "stream":
            self.printed[request] = self.printed.get(request, "") + content["text"]
        elif kind == "error":
            self._errors[request] = "\n".join(content.get("traceback") or [content.get("evalue", "")])
        elif kind == "status":
            self.statuses.append((content["execution_state"], request))
            if content["execution_state"] == "idle":
                self._idle.add(request)

    # -- what a browser sends ---------------------------------------------------------------

    def _comm(self, model_id: str, data: dict[str, Any]) -> str:
        message = self._client.session.msg("comm_msg", {"comm_id": model_id, "data": data})
        self._client.shell_channel.send(message)
        return str(message["header"]["msg_id"])

    def control(self, kind: str, content: dict[str, Any] | None = None) -> str:
        """Send a request on the control channel (JupyterLab's widget manager asks for a subshell there)."""
        message = self._client.session.msg(kind, content or {})
        self._client.control_channel.send(message)
        return str(message["header"]["msg_id"])

    def click(self, model_id: str) -> None:
        """Click a button."""
        assert not self.models[model_id].get("disabled"), "clicking a disabled button"
        self._comm(model_id, {"method": "custom", "content": {"event": "click"}})

    def set_value(self, model_id: str, value: Any) -> None:
        """Change a widget's value (a toggle button, a checkbox)."""
        self.models[model_id]["value"] = value
        self._comm(model_id, {"method": "update", "state": {"value": value}, "buffer_paths": []})

    async def type_text(self, model_id: str, text: str, limit: float = 10.0) -> None:
        """Type into a text box key by key, as a browser's widget manager sends it: one state update per key, the
        next only once the kernel said `idle` for the previous one (ipywidgets' message throttle)."""
        for end in range(1, len(text) + 1):
            self.models[model_id]["value"] = text[:end]
            sent = self._comm(model_id, {"method": "update", "state": {"value": text[:end]}, "buffer_paths": []})
            what = f"the kernel's idle for the update {text[:end]!r}"
            await self.until(lambda sent=sent: sent in self._idle, what, limit)
