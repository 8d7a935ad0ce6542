"""The tests' fork server for `freeact-sub` runs: it imports the command's libraries once, then forks a run per request.

Run by path (`tests/cli_fork.py` starts it, one per pytest worker). A `freeact-sub` run spends most of its start-up
CPU importing pydantic-ai, the provider SDKs and `mcp` (about 3 s of CPU on CI's machine, and the suite runs the
command some 90 times). Here they are imported once; each request forks a process that becomes the run: it takes the
launcher's standard streams, working folder, environment and arguments, and runs `freeact_sub.terminal.cli` as
`python -m` would (or `freeact_sub.cli`, the entry with `acp`, or `ipykernel_launcher`: a notebook's kernel, which
imports freeact-sub and the same libraries). The command's modules are imported ahead as well (none
reads a setting when it is imported), but its `main` and all it calls run in the run. What a start imports, and in
which order, is checked in fresh interpreters (`tests/unit/test_start_imports.py`), not here.

Protocol, on a Unix SEQPACKET socket (one message each way per step):
  launcher → server: {"module": "freeact_sub.cli", "argv": [...], "cwd": "...", "env": {...}} with its fds 0, 1, 2
  attached (SCM_RIGHTS);
  server → launcher: {"pid": N}, or {"fallback": "why"} when a fork could not be like a fresh interpreter;
  server → launcher, when the run ends: {"status": waitpid status}.
If the launcher's connection closes first, its run is killed (as the command dies with a SIGKILL'd parent's pipes).
The server ends, killing its runs, when its stdin closes (its owner, the pytest worker, is gone).
"""

from __future__ import annotations

import fcntl
import gc
import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import tempfile
import termios
import threading

LIBRARIES = (
    # what a `freeact-sub --demo -p ...` run imports, the costly ones first
    "pydantic_ai",
    "pydantic_ai.models.openai",
    "pydantic_ai.models.anthropic",
    "pydantic_ai.providers.openai",
    "pydantic_ai.providers.anthropic",
    "openai",
    "anthropic",
    "mcp",
    "mcp.client.stdio",
    "mcp.client.session",
    "mcp.server.lowlevel",
    "httpx",
    "uvicorn",
    "starlette.applications",
    "sse_starlette",
    "jupyter_client",
    "zmq",
    "yaml",
    "griffe",
    "rich.console",
    "rich.live",
    "rich.markdown",
    "rich.syntax",
    "prompt_toolkit",
    "psutil",
    "dateutil.parser",
    # what a notebook's kernel imports (`ipykernel_launcher` runs: `kernel_spec_folder`)
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "ipywidgets",
    # and ours, whose modules read no setting when imported (the environment, the home folder: all when called)
    "freeact_sub.terminal.runner",
    "freeact_sub.terminal.session",
    "freeact_sub.agent.agent",
    "freeact_sub.demo.server",
    "freeact_sub.sessions",
    "freeact_sub.acp.server",
)
_MAX_MESSAGE = 4 << 20
_START_VARIABLES = ("PYTHON", "LD_", "LC_", "LANG")
"""Variables a process takes on only when it starts (PYTHONPATH, PYTHONIOENCODING, LD_PRELOAD, its locale): a run
whose environment differs from the server's in these is not forked (the launcher starts the command itself)."""
_MODULES = ("freeact_sub.terminal.cli", "freeact_sub.cli", "ipykernel_launcher")
_SCRIPTS = (
    # the kernel the tests' gateways start (`tests/gateway_server.py`), ours run by path as the product launches it
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "freeact_sub", "kernels",
                 "_ipykernel_launcher.py"),
)


def preload() -> list[str]:
    """Import the command's libraries; the names that failed (an optional SDK not installed)."""
    missing = []
    for name in LIBRARIES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    # jsonschema as the command imports it: without the IRI grammar (its Lark parsers are ~2.5 s of CPU)
    importlib.import_module("freeact_sub.tools").jsonschema_module()
    gc.collect()
    gc.freeze()  # what was imported is never walked again, in here or in a run (the command freezes its own start)
    return missing


def _start_settings(env: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if name.startswith(_START_VARIABLES)}


def serve(path: str) -> tuple[dict, list[int]]:
    """Serve requests until stdin closes (then exit); returns only in a forked run, with its request and fds."""
    if threading.active_count() != 1:  # a fork copies only the forking thread: a library's thread would be lost
        raise SystemExit(f"cli fork server: a library started a thread: {threading.enumerate()}")
    started_with = _start_settings(dict(os.environ))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    runs: dict[int, socket.socket] = {}  # pid → its launcher's connection, until the run is reaped
    watched: dict[socket.socket, int] = {}  # connections whose launcher is there, and their run
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        try:
            readable, _, _ = select.select([sys.stdin, listener, wake_read, *watched], [], [])
        except InterruptedError:
            continue
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 4096):
            for pid in runs:
                _kill(pid)
            os._exit(0)
        for connection in readable:
            if connection in watched:
                try:
                    gone = not connection.recv(16)
                except OSError:
                    gone = True
                if gone:  # the launcher died (or was SIGKILLed): so does its run
                    _kill(watched.pop(connection))
        if wake_read in readable:
            while True:
                try:
                    if not os.read(wake_read, 4096):
                        break
                except BlockingIOError:
                    break
            _reap(runs, watched)
        if listener in readable:
            connection, _ = listener.accept()
            try:
                data, fds, _, _ = socket.recv_fds(connection, _MAX_MESSAGE, 3)
                request = json.loads(data)
            except (OSError, ValueError) as error:
                connection.close()
                sys.stderr.write(f"cli fork server: a bad request: {error}\n")
                continue
            why = None
            if _start_settings(request["env"]) != started_with:
                why = "its PYTHON*, LD_* or locale variables differ from the server's"
            elif len(fds) != 3 or request.get("module") not in (*_MODULES, *_SCRIPTS):
                why = "a module or script of freeact-sub and three standard streams expected"
            if why:
                connection.send(json.dumps({"fallback": why}).encode())
                connection.close()
                for fd in fds:
                    os.close(fd)
                continue
            pid = os.fork()
            if pid == 0:
                listener.close()
                for other in runs.values():
                    other.close()
                connection.close()
                signal.set_wakeup_fd(-1)
                os.close(wake_read)
                os.close(wake_write)
                return request, fds
            for fd in fds:
                os.close(fd)
            runs[pid] = connection
            watched[connection] = pid
            connection.send(json.dumps({"pid": pid}).encode())


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(runs: dict[int, socket.socket], watched: dict[socket.socket, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = runs.pop(pid, None)
        if connection is None:
            continue
        watched.pop(connection, None)
        try:
            connection.send(json.dumps({"status": status}).encode())
        except OSError:
            pass  # its launcher is gone
        connection.close()


def become(request: dict, fds: list[int]) -> None:
    """Turn this forked process into the run: `python -m MODULE ARGS` in the launcher's place."""
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds) - {0, 1, 2}:
        os.close(fd)
    if request.get("terminal"):  # the session's leader on the launcher's terminal, which the launcher gave up
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # found again from the run's TMPDIR, should an import have asked for it in the server
    if request["module"] in _SCRIPTS:
        sys.argv = [request["module"], *request["argv"]]
        sys.path[0] = os.path.dirname(request["module"])  # as `python SCRIPT` does
    else:
        sys.argv = ["-m", *request["argv"]]  # runpy puts the module's path first, as `python -m` does
        sys.path[0] = os.getcwd()  # `python -m` puts the working folder first on the path, not the script's folder


if __name__ == "__main__":
    preload()
    run_request, run_fds = serve(sys.argv[1])
    become(run_request, run_fds)
    if run_request["module"] in _SCRIPTS:
        runpy.run_path(run_request["module"], run_name="__main__")
    else:
        runpy.run_module(run_request["module"], run_name="__main__", alter_sys=True)
