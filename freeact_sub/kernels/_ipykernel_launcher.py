"""The IPython kernel every local kernel runs: ipykernel's, with an iopub publisher that never drops.

ipykernel's iopub socket keeps ZeroMQ's default send high-water mark (1000 messages). When
the client reads slower than the kernel prints (its process starved of CPU on a loaded
machine, or stopped), the publisher's queue to that client fills and ZeroMQ silently drops
what does not fit, the cell's final `status: idle` included. `KernelApp` creates the iopub
socket with no send limit, so every message waits for the client instead.

A high-water mark applies to connections made after it is set, and ipykernel creates and binds
the socket in one step (`init_iopub`), so the limit is set as the context's default for
sockets created during that step.

Launched kernels run this file by its path (`python .../_ipykernel_launcher.py -f conn.json`),
not with `-m`, so the kernel does not import the `freeact_sub` package; the kernel zygote
imports `KernelApp` from here and forks kernels that run it.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    # Run by path, Python put this package's folder first on sys.path, where its modules
    # (`mcp.py`, `events.py`, …) would shadow the packages the model's code imports.
    del sys.path[0]

SANDBOX_PLAN_VARIABLE = "FREEACT_SUB_SANDBOX_PLAN"  # the same name as in kernel_launcher.py
"""A launched kernel confines itself to the sandbox plan (JSON) in this variable before ipykernel starts."""
TOOLS_SOCKET_VARIABLE = "FREEACT_SUB_TOOLS_SOCKET"  # the same name as in local_manager.py
"""Where the kernel listens for its agent's code-tools channel (bound before the sandbox's seal)."""
TOOLS_LISTENER_VARIABLE = "FREEACT_SUB_TOOLS_LISTENER"
"""The listening socket's file descriptor, for the `mcptools` runtime (`code_tools/kernel_runtime.py`)."""
_ENFORCE_MODULE = "_freeact_sub_enforce"  # the zygote loads it under this name too


def _confine(plan_text: str) -> dict[str, object]:
    """Apply a sandbox plan with `sandbox/enforce.py`, loaded by path (this file does not import the package)."""
    import importlib.util
    import json

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sandbox", "enforce.py")
    spec = importlib.util.spec_from_file_location(_ENFORCE_MODULE, path)
    assert spec is not None and spec.loader is not None
    enforce = importlib.util.module_from_spec(spec)
    sys.modules[_ENFORCE_MODULE] = enforce
    spec.loader.exec_module(enforce)
    plan: dict[str, object] = json.loads(plan_text)
    try:
        enforce.apply(plan)
    except OSError as exc:
        sys.exit(f"freeact-sub sandbox: {exc}")
    return plan


_launched_plan = None
if __name__ == "__main__" and (_plan_text := os.environ.pop(SANDBOX_PLAN_VARIABLE, None)):
    _launched_plan = _confine(_plan_text)  # before ipykernel is imported: the process still has a single thread

import socket  # noqa: E402


def _debugger_without_debugpy() -> None:
    """Import ipykernel's debugger module with debugpy hidden, so this kernel offers no visual debugger.

    `IPythonKernel.__init__` imports `ipykernel.debugger`, which imports debugpy where it is installed (~0.12 s of
    CPU, an eighth of a launched kernel's start; in the zygote, a part of every forked kernel's memory) to serve
    JupyterLab's debugger. No one attaches one to an agent's kernel: its host is its only client. debugpy is hidden
    only while that module imports, so a cell's own `import debugpy` still works.
    """
    if "ipykernel.debugger" in sys.modules or "debugpy" in sys.modules:
        return
    sys.modules["debugpy"] = None  # type: ignore[assignment]  # an ImportError there: `_is_debugpy_available` False
    try:
        import ipykernel.debugger  # noqa: F401
    finally:
        del sys.modules["debugpy"]


_debugger_without_debugpy()

import zmq  # noqa: E402 - after the sys.path fix and the sandbox above
from ipykernel.kernelapp import IPKernelApp  # noqa: E402
from traitlets.config import Config  # noqa: E402
from traitlets.config.loader import DeferredConfigString  # noqa: E402

__all__ = ["KernelApp", "main"]


class KernelApp(IPKernelApp):
    """ipykernel's kernel application with an unlimited send queue on the iopub socket.

    In a sandbox (`sandbox_plan`), once every socket the kernel listens on is bound (its channels and its
    code-tools listener), the plan's seal (`enforce.seal`) is put on every thread before any cell runs: from
    then on the kernel can make no Unix socket of its own, so it reaches none it was not handed. It starts no
    heartbeat there (its thread would bind after the seal; the host never reads it).

    It also reads its own command line (`-f FILE --Class.trait=value ...`, all a kernel is given) without
    traitlets' parser, which builds an argparse parser of every alias, flag and configurable class first: ~7 ms
    of a forked kernel's ~45 ms of CPU to its first cell. Any other command line goes to traitlets.
    """

    sandbox_plan: dict[str, object] | None = None
    """The sandbox plan this kernel was confined to before it started (set by the zygote or the launcher)."""

    def initialize(self, argv: list[str] | None = None) -> None:
        super().initialize(argv)
        _listen_for_tools()
        if self.sandbox_plan is not None:
            sys.modules[_ENFORCE_MODULE].seal(self.sandbox_plan)

    def init_heartbeat(self) -> None:
        if self.sandbox_plan is None:
            super().init_heartbeat()

    def parse_command_line(self, argv: list[str] | None = None) -> None:
        config = _plain_options(sys.argv[1:] if argv is None else argv)
        if config is None:
            super().parse_command_line(argv)
            return
        self.argv = list(sys.argv[1:] if argv is None else argv)
        self.cli_config = config
        self.update_config(config)
        self.extra_args = []

    def init_iopub(self, context: zmq.Context) -> None:
        context.sndhwm = 0  # a default for the sockets created by this context from now on
        try:
            super().init_iopub(context)
        finally:
            del context.sndhwm


def _plain_options(argv: list[str]) -> Config | None:
    """The configuration `-f FILE` and `--Class.trait=value` options make, as traitlets makes it; None for
    anything else (a flag, a repeated or container option, a positional argument), which traitlets must parse.

    Values stay strings (`DeferredConfigString`) that each trait converts itself when it is configured, which
    is how traitlets keeps them for classes its parser does not know.
    """
    config = Config()
    seen: set[tuple[str, str]] = set()
    rest = list(argv)
    while rest:
        argument = rest.pop(0)
        if argument == "-f" and rest:
            key, value = "IPKernelApp.connection_file", rest.pop(0)  # ipykernel's alias
        elif argument.startswith("--") and "=" in argument:
            key, value = argument[2:].split("=", 1)
        else:
            return None
        section, _, name = key.rpartition(".")
        if not (section.isidentifier() and section[0].isupper() and name.isidentifier()):
            return None  # not `Class.trait` (traitlets reads a lower-case or nested key otherwise)
        if (section, name) in seen:
            return None  # traitlets appends repeated options to a list
        seen.add((section, name))
        config[section][name] = DeferredConfigString(value)
    return config


def _listen_for_tools() -> None:
    """Bind the code-tools listener where the host asked (the agent connects to it; the kernel only accepts)."""
    path = os.environ.get(TOOLS_SOCKET_VARIABLE)
    if not path:
        return
    try:
        os.unlink(path)  # a restart's: the process that bound it is gone
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    os.environ[TOOLS_LISTENER_VARIABLE] = str(listener.detach())  # close-on-exec: no program it starts gets it


if _launched_plan is not None:
    KernelApp.sandbox_plan = _launched_plan


def main() -> None:
    """Run a kernel, as `python -m ipykernel_launcher` does."""
    KernelApp.launch_instance()


if __name__ == "__main__":
    main()
