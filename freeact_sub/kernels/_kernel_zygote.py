"""The kernel zygote: a process that has imported ipykernel once and forks a fresh kernel per request.

Booting an IPython kernel is mostly importing (IPython, ipykernel, jupyter_client, zmq: ~0.35 s
of CPU). A zygote pays that once; each kernel it forks starts with the imports done, so a burst
of subagents gets its kernels in a fraction of the time. A forked kernel has never run user
code: it is as fresh as a newly launched one, with its own environment, working directory,
connection file and session.

Protocol, one JSON object per line. The host writes requests to stdin:
    {"id": 1, "argv": [...], "env": {...}, "cwd": "...", "log": "/path/kernel.log"}
and the zygote answers on stdout:
    {"ready": <zygote pid>}                    once, after the imports
    {"id": 1, "pid": <kernel pid>}             for each request
    {"exited": <kernel pid>, "status": <code>} when a kernel exits (the zygote reaps it)
When stdin closes (the host stopped or died), the zygote kills the kernels it forked and exits.

Run by its path (`python .../_kernel_zygote.py`), like `_ipykernel_launcher.py`: not the `freeact_sub`
package (the agent, pydantic, ...: ~0.3 s of imports and ~100 modules no kernel needs, which every forked
kernel would carry in `sys.modules` and copy pages of). `freeact_sub.kernels.launcher` is the host side.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import json
import os
import signal
import sys
import traceback
from types import ModuleType
from typing import Any

if __name__ == "__main__" and sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    # Run by path, Python put this package's folder first on sys.path, where its modules
    # (`mcp.py`, `events.py`, …) would shadow the packages the model's code imports.
    del sys.path[0]

_HERE = os.path.dirname(os.path.abspath(__file__))

_PRELOADED = (
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "ipykernel.debugger",
    "IPython.core.completerlib",
    "IPython.core.debugger",
    "IPython.core.oinspect",
    "IPython.extensions.storemagic",
    "IPython.core.logger",
    "faulthandler",
    "runpy",
    "sqlite3",
    "tornado.platform.asyncio",
)


def _load(name: str, path: str) -> ModuleType:
    """The module in the file `path` (beside this one), imported under `name` without its package."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# The kernel application and the sandbox (stdlib only), both made to run without the package: loaded by main().
_LAUNCHER, _ENFORCE = "_freeact_sub_ipykernel_launcher", "_freeact_sub_enforce"


def _send(message: dict[str, Any]) -> None:
    # One write of a short line is atomic on a pipe, so the SIGCHLD handler cannot interleave with it.
    os.write(1, (json.dumps(message) + "\n").encode())


def _become_kernel(request: dict[str, Any]) -> None:
    """In the forked child: detach, take on the request's environment, and run an IPython kernel."""
    code = 1
    try:
        os.setsid()  # own session and process group, like a kernel launched by jupyter_client
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        devnull = os.open(os.devnull, os.O_RDWR)
        # the log's folder is the host's, not the kernel's; a link there is followed all the same by no one
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.dup2(log, 2)
        os.close(devnull)
        os.close(log)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        launcher = sys.modules[_LAUNCHER]
        if request.get("sandbox") is not None:
            # before any of the kernel's code, while this process has one thread; sealed once its sockets are bound
            sys.modules[_ENFORCE].apply(request["sandbox"])
            launcher.KernelApp.sandbox_plan = request["sandbox"]
        # ipykernel reads JPY_PARENT_PID when it is imported, which was in the zygote before any
        # request: name the zygote explicitly so the kernel's parent poller ends it when the zygote goes.
        argv = [*request["argv"], f"--IPKernelApp.parent_handle={os.getppid()}"]
        sys.argv = ["ipykernel_launcher", *argv]
        launcher.KernelApp.launch_instance(argv=argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def main() -> None:
    # The imports every kernel needs, done once here; the rest is what a kernel's own
    # start-up imports on the way (the debugger brings debugpy: ~0.1 s on its own).
    _load(_LAUNCHER, "_ipykernel_launcher.py")
    _load(_ENFORCE, os.path.join(os.pardir, "sandbox", "enforce.py"))
    for module in _PRELOADED:
        importlib.import_module(module)
    # What the imports made lives as long as any kernel: out of the collector's sight, a full collection in a
    # kernel does not walk (and so copy, page by page) all of the zygote's memory it shares.
    gc.collect()
    gc.freeze()

    children: set[int] = set()

    def reap(signum: int, frame: object) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children.discard(pid)
            _send({"exited": pid, "status": os.waitstatus_to_exitcode(status)})

    signal.signal(signal.SIGCHLD, reap)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _send({"ready": os.getpid()})
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _become_kernel(request)
            children.add(pid)
            _send({"id": request["id"], "pid": pid})
    finally:
        for pid in list(children):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


if __name__ == "__main__":
    main()
