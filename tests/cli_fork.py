"""`freeact-sub` runs for the tests, forked from a process that has the command's libraries imported already.

    subprocess.run(cli_command("--demo", "-p", "hi"), ...)  # [sys.executable, "-m", "freeact_sub.terminal.cli", ...]

Each run is a process of its own with the test's streams, folder, environment and arguments, running the command's
whole start-up code; only the imports (pydantic-ai, the provider SDKs, `mcp`, ours) are done once per pytest worker,
in the fork server (`tests/_cli_fork_server.py`), not in each of the suite's ~90 runs (3–4 s of CPU each). A test that
needs a fresh interpreter (what a start imports, a terminal) starts the command itself, or gets it from the launcher,
which falls back to `exec` of the real command where a fork could not be the same (see `tests/_cli_fork_launch.py`).

A notebook's kernel is forked the same way (`ForkedKernelManager`, `kernel_spec_folder`): it imports freeact-sub and
the same libraries, 3-4 s of CPU in each of the notebook tests' kernels.

`FREEACT_SUB_TEST_CLI=exec` makes every run, and every such kernel, the real command.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpecManager

__all__ = [
    "START_VARIABLES",
    "ForkedKernelManager",
    "cli_command",
    "cli_fork_server_pids",
    "forked_kernel_specs",
    "kernel_spec_folder",
    "module_command",
    "run_of",
]

_HERE = Path(__file__).resolve().parent
_SERVER = _HERE / "_cli_fork_server.py"
_LAUNCHER = _HERE / "_cli_fork_launch.py"

START_VARIABLES = ("PYTHON", "LD_", "LC_", "LANG")
"""Prefixes of the variables a process takes on only as it starts: a run whose own differ is not forked (the same
as `_START_VARIABLES` in `tests/_cli_fork_server.py`, which runs by path and imports nothing of the tests)."""

_lock = threading.Lock()
_server: subprocess.Popen[bytes] | None = None
_socket: str | None = None
_kernel_specs: Path | None = None


def _start() -> str | None:
    """The socket of this process's fork server, started on first use; None if it cannot start."""
    global _server, _socket
    with _lock:
        if _server is not None and _server.poll() is None:
            return _socket
        folder = tempfile.mkdtemp(prefix="cf-")  # short: an AF_UNIX path has 108 bytes
        path = os.path.join(folder, "s")
        # It starts with little of the worker's environment (each run gets its own): what a fork shows as its start-up
        # environment (/proc/self/environ) holds no variable a test set, a key above all.
        kept = {name: value for name, value in os.environ.items()
                if name in ("PATH", "HOME", "USER", "TMPDIR") or name.startswith(START_VARIABLES)}
        server = subprocess.Popen(
            [sys.executable, str(_SERVER), path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=folder, env=kept,
        )
        assert server.stdout is not None
        if server.stdout.readline() != b"ready\n":
            server.kill()
            server.wait()
            return None
        _server, _socket = server, path
        return path


def _stop() -> None:
    if _server is not None and _server.poll() is None:
        assert _server.stdin is not None
        _server.stdin.close()  # it kills its runs and ends
        try:
            _server.wait(10)
        except subprocess.TimeoutExpired:
            _server.kill()
            _server.wait()
    for folder in (Path(_socket).parent if _socket is not None else None, _kernel_specs):
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


atexit.register(_stop)


def module_command(module: str, *args: str) -> list[str]:
    """The command line of a run of `python -m MODULE ARGS`: MODULE `freeact_sub.terminal.cli`, `freeact_sub.cli` or
    `ipykernel_launcher`; or of `python MODULE ARGS` where MODULE is the path of our kernel launcher script."""
    path = None if os.environ.get("FREEACT_SUB_TEST_CLI") == "exec" else _start()
    if path is None:
        return [sys.executable, *([module] if module.endswith(".py") else ["-m", module]), *args]
    return [sys.executable, "-S", str(_LAUNCHER), path, module, *args]


def cli_command(*args: str) -> list[str]:
    """The command line of a `freeact-sub ARGS` run (as `python -m freeact_sub.terminal.cli ARGS`)."""
    return module_command("freeact_sub.terminal.cli", *args)


def kernel_spec_folder(folder: Path) -> Path:
    """`folder/kernels/python3`: the `python3` kernel spec of a notebook's kernel forked by the fork server.

    A notebook's kernel imports freeact-sub, pydantic-ai and the provider SDKs (3-4 s of CPU); forked, it starts with
    them imported. Make `folder` a Jupyter server's `JUPYTER_DATA_DIR`, or see `forked_kernel_specs`. Under
    `FREEACT_SUB_TEST_CLI=exec`, the spec starts the real kernel.
    """
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    argv = module_command("ipykernel_launcher", "-f", "{connection_file}")
    kernel = {"argv": argv, "display_name": "Python 3 (ipykernel)", "language": "python",
              "metadata": {"debugger": True}, "kernel_protocol_version": "5.5"}  # as ipykernel's own spec
    (spec / "kernel.json").write_text(json.dumps(kernel))
    return spec


class ForkedKernelManager(AsyncKernelManager):
    """jupyter_client's kernel manager whose `python3` kernel is forked (`NotebookClient(kernel_manager_class=...)`)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("kernel_spec_manager", forked_kernel_specs())
        super().__init__(**kwargs)


def forked_kernel_specs() -> KernelSpecManager:
    """Kernel specs for jupyter_client whose `python3` kernel is forked by the fork server."""
    global _kernel_specs
    with _lock:
        if _kernel_specs is None:
            _kernel_specs = Path(tempfile.mkdtemp(prefix="cf-kernels-"))
    kernel_spec_folder(_kernel_specs)
    return KernelSpecManager(kernel_dirs=[str(_kernel_specs / "kernels")])


def cli_fork_server_pids() -> set[int]:
    """The PID of this process's fork server, if it runs: it lives as long as the process (its runs are counted)."""
    return {_server.pid} if _server is not None and _server.poll() is None else set()


def run_of(pid: int) -> int:
    """The PID of the run a process of `cli_command` started: the forked run for a launcher, else `pid` itself."""
    if _socket is not None:
        note = Path(_socket).parent / f"run-of-{pid}"
        if note.exists():
            return int(note.read_text())
    return pid
