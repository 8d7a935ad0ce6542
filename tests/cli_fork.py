"""`freeact-sub` runs for the tests, forked from a process that has the command's libraries imported already.

    subprocess.run(cli_command("--demo", "-p", "hi"), ...)  # [sys.executable, "-m", "freeact_sub.terminal.cli", ...]

Each run is a process of its own with the test's streams, folder, environment and arguments, running the command's
whole start-up code; only the imports (pydantic-ai, the provider SDKs, `mcp`, ours) are done once per pytest worker,
in the fork server (`tests/_cli_fork_server.py`), not in each of the suite's ~90 runs (3–4 s of CPU each). A test that
needs a fresh interpreter (what a start imports, a terminal) starts the command itself, or gets it from the launcher,
which falls back to `exec` of the real command where a fork could not be the same (see `tests/_cli_fork_launch.py`).

`FREEACT_SUB_TEST_CLI=exec` makes every run the real command.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

__all__ = ["cli_command", "cli_fork_server_pids", "module_command", "run_of"]

_HERE = Path(__file__).resolve().parent
_SERVER = _HERE / "_cli_fork_server.py"
_LAUNCHER = _HERE / "_cli_fork_launch.py"

_lock = threading.Lock()
_server: subprocess.Popen[bytes] | None = None
_socket: str | None = None


def _start() -> str | None:
    """The socket of this process's fork server, started on first use; None if it cannot start."""
    global _server, _socket
    with _lock:
        if _server is not None and _server.poll() is None:
            return _socket
        folder = tempfile.mkdtemp(prefix="cf-")  # short: an AF_UNIX path has 108 bytes
        path = os.path.join(folder, "s")
        server = subprocess.Popen(
            [sys.executable, str(_SERVER), path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=folder,
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
    if _socket is not None:
        shutil.rmtree(Path(_socket).parent, ignore_errors=True)


atexit.register(_stop)


def module_command(module: str, *args: str) -> list[str]:
    """The command line of a run of `python -m MODULE ARGS`, MODULE `freeact_sub.terminal.cli` or `freeact_sub.cli`."""
    path = None if os.environ.get("FREEACT_SUB_TEST_CLI") == "exec" else _start()
    if path is None:
        return [sys.executable, "-m", module, *args]
    return [sys.executable, "-S", str(_LAUNCHER), path, module, *args]


def cli_command(*args: str) -> list[str]:
    """The command line of a `freeact-sub ARGS` run (as `python -m freeact_sub.terminal.cli ARGS`)."""
    return module_command("freeact_sub.terminal.cli", *args)


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
