"""The entry of the sandbox's proxy in a process of its own: `python -I -S .../proxy_process.py FD`.

Run by its path, like `kernels/_kernel_zygote.py`: it loads the proxy's modules of this folder (`proxy_server`,
`proxy`, `proxy_loop`, `proxy_request`, `relay`, `hosts`: the standard library only) as a package of their own,
never the `freeact_sub` package (the agent, pydantic, ...: hundreds of milliseconds and megabytes a proxy does not
need). FD is its end of the host's control socket (`proxy_server`). It runs in the host's process group, but Ctrl-C
in the host's terminal is not for it: it ignores `SIGINT` and ends with its host's stream.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import types

_PACKAGE = "_freeact_sub_proxy"


def _run() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0]) == here:
        del sys.path[0]  # run by path: this folder's modules are loaded as the package below, never by their names
    package = types.ModuleType(_PACKAGE)
    package.__path__ = [here]
    sys.modules[_PACKAGE] = package
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fd = int(sys.argv[1])
    try:
        server = importlib.import_module(f"{_PACKAGE}.proxy_server")
    except BaseException as exc:  # say why to the host, which runs its proxy in a thread instead
        import marshal
        import socket

        with socket.socket(fileno=fd) as control:
            control.send(marshal.dumps(("failed", f"{type(exc).__name__}: {exc}")))
        raise
    server.main(fd)


if __name__ == "__main__":
    _run()
