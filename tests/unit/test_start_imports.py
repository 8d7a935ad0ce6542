"""What a start imports: each cut of the command's start (issue 38) stays cut.

Each probe runs in a fresh interpreter and reads `sys.modules`, so a module-level import that comes back fails here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import freeact_sub

PACKAGE = Path(freeact_sub.__file__).parent


def _probe(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.split()


def test_an_agent_kernel_starts_without_debugpy_and_its_cells_may_still_import_it() -> None:
    """ipykernel's debugger brings debugpy (~0.12 s of a launched kernel's CPU); no one debugs an agent's kernel."""
    launcher = PACKAGE / "kernels" / "_ipykernel_launcher.py"
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('_launcher', {str(launcher)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "import ipykernel.ipkernel\n"
        "from ipykernel.debugger import _is_debugpy_available\n"
        "print(_is_debugpy_available, 'debugpy' in sys.modules)\n"
        "import importlib.util\n"
        "if importlib.util.find_spec('debugpy') is not None:\n"
        "    import debugpy\n"
        "print('importable')\n"
    )
    assert _probe(code) == ["False", "False", "importable"]


FORMAT_LIBRARIES = ["isoduration", "arrow", "fqdn", "webcolors", "uri_template", "rfc3339_validator"]


def test_the_command_loads_jsonschema_without_its_format_libraries_and_a_program_keeps_them(tmp_path: Path) -> None:
    """The command's configuration (`launch.build_config`) makes jsonschema load lean (~0.09 s of CPU a start), and
    its demo server loads no WebSocket protocol (~0.03 s); a program that imports `freeact_sub` and checks tool
    arguments still gets jsonschema with its formats."""
    command = (
        "import pathlib, sys\n"
        "from freeact_sub.terminal.arguments import build_parser\n"
        "from freeact_sub.terminal.runner import Runner\n"
        "from freeact_sub.tools import Toolbox, builtin_tool\n"
        "runner = Runner(build_parser().parse_args(['--demo', '-p', 'x', '--auto-approve']))\n"
        f"config = runner._configure(pathlib.Path({str(tmp_path)!r}))\n"
        "runner.demo.close()\n"
        "box = Toolbox([builtin_tool('execute_ipython_cell')])\n"
        "print(box.check('execute_ipython_cell', {}) is not None, 'jsonschema' in sys.modules)\n"
        "print(any(name.startswith('uvicorn.protocols.websockets') for name in sys.modules))\n"
        f"print(sorted(set({FORMAT_LIBRARIES!r}) & set(sys.modules)) or 'none')\n"
        "import importlib.util\n"
        "if importlib.util.find_spec('isoduration') is not None:\n"
        "    import isoduration\n"
        "print('importable')\n"
    )
    assert _probe(command) == ["True", "True", "False", "none", "importable"]
    program = (
        "import importlib.util, sys\n"
        "from freeact_sub.tools import Toolbox, builtin_tool\n"
        "Toolbox([builtin_tool('execute_ipython_cell')])\n"
        "print(importlib.util.find_spec('isoduration') is None or 'isoduration' in sys.modules)\n"
    )
    assert _probe(program) == ["True"]


_COUNT_PROBES = (
    "import subprocess, sys, threading, time\n"
    "probes = []\n"
    "real_run = subprocess.run\n"
    "def run(argv, *args, **kwargs):\n"
    "    if any('run_confined' in str(part) for part in argv):\n"
    "        probes.append(threading.current_thread().name)\n"
    "        time.sleep(0.3)  # a slow machine's probe: long enough for a second caller to come meanwhile\n"
    "    return real_run(argv, *args, **kwargs)\n"
    "subprocess.run = run\n"
)


def test_the_sandbox_is_probed_once_however_many_ask_at_once() -> None:
    code = _COUNT_PROBES + (
        "import threading\n"
        "from freeact_sub.sandbox import platform_problem\n"
        "early = threading.Thread(target=platform_problem); early.start()\n"
        "time.sleep(0.05)\n"
        "answer = platform_problem(); early.join()\n"
        "print(len(probes))\n"
    )
    assert _probe(code) == ["1"]


def test_the_command_probes_the_sandbox_beside_its_start_not_on_the_event_loop(tmp_path: Path) -> None:
    """The probe (a process) runs in a thread while the configuration loads; the agent's start finds its answer."""
    code = _COUNT_PROBES + (
        "import pathlib\n"
        "from freeact_sub.sandbox import platform_problem\n"
        "from freeact_sub.terminal.arguments import build_parser\n"
        "from freeact_sub.terminal.runner import Runner\n"
        "runner = Runner(build_parser().parse_args(['--demo', '-p', 'x', '--auto-approve']))\n"
        f"runner._configure(pathlib.Path({str(tmp_path)!r}))\n"
        "runner.demo.close()\n"
        "platform_problem()\n"
        "print(probes)\n"
    )
    assert _probe(code) == ["['freeact-sub-sandbox-probe']"]
