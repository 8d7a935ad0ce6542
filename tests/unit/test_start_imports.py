"""What a start imports and waits for: each cut of the command's start (issue 38) stays cut.

Each probe runs in a fresh interpreter and reads `sys.modules`, so a module-level import that comes back fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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
FORMAT_LIBRARIES = ["isoduration", "arrow", "fqdn", "webcolors", "uri_template", "rfc3339_validator"]


@pytest.fixture(scope="module")
def command_start(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the terminal command's start (`--demo -p`: its configuration, then an agent's toolbox and its sandbox
    check) left in one fresh interpreter: one run, read by the tests below."""
    folder = tmp_path_factory.mktemp("command")
    code = _COUNT_PROBES + (
        "import importlib.util, json, pathlib\n"
        "from freeact_sub.sandbox import platform_problem\n"
        "from freeact_sub.terminal.arguments import build_parser\n"
        "from freeact_sub.terminal.runner import Runner\n"
        "from freeact_sub.tools import Toolbox, builtin_tool\n"
        "runner = Runner(build_parser().parse_args(['--demo', '-p', 'x', '--auto-approve']))\n"
        f"runner._configure(pathlib.Path({str(folder)!r}))\n"
        "runner.demo.close()\n"
        "box = Toolbox([builtin_tool('execute_ipython_cell')])\n"
        "platform_problem()\n"
        "facts = {'checks': box.check('execute_ipython_cell', {}) is not None, 'probes': probes,\n"
        "         'websockets': any(name.startswith('uvicorn.protocols.websockets') for name in sys.modules),\n"
        f"         'formats': sorted(set({FORMAT_LIBRARIES!r}) & set(sys.modules))}}\n"
        "if importlib.util.find_spec('isoduration') is not None:\n"
        "    import isoduration\n"
        "print(json.dumps(facts))\n"
    )
    facts: dict[str, Any] = json.loads(" ".join(_probe(code)))
    return facts


def test_the_command_loads_jsonschema_without_its_format_libraries(command_start: dict[str, Any]) -> None:
    """The command's configuration (`launch.build_config`) makes jsonschema load lean (~0.09 s of CPU a start); the
    arguments are checked all the same, and the libraries still import after."""
    assert command_start["checks"] is True
    assert command_start["formats"] == []


def test_the_demo_server_loads_no_websocket_protocol(command_start: dict[str, Any]) -> None:
    """uvicorn loads one unless told not to (~0.03 s of CPU a start); the demo server serves none."""
    assert command_start["websockets"] is False


def test_a_program_keeps_jsonschemas_formats() -> None:
    """Only the command skips them: a program that imports `freeact_sub` gets jsonschema as it comes."""
    program = (
        "import importlib.util, sys\n"
        "from freeact_sub.tools import Toolbox, builtin_tool\n"
        "Toolbox([builtin_tool('execute_ipython_cell')])\n"
        "print(importlib.util.find_spec('isoduration') is None or 'isoduration' in sys.modules)\n"
    )
    assert _probe(program) == ["True"]


def test_the_command_probes_the_sandbox_beside_its_start_not_on_the_event_loop(command_start: dict[str, Any]) -> None:
    """The probe (a process) runs in a thread while the configuration loads; the agent's check finds its answer."""
    assert command_start["probes"] == ["freeact-sub-sandbox-probe"]


def test_the_sandbox_is_probed_once_however_many_ask_at_once() -> None:
    code = _COUNT_PROBES + (
        "from freeact_sub.sandbox import platform_problem\n"
        "early = threading.Thread(target=platform_problem); early.start()\n"
        "time.sleep(0.05)\n"
        "platform_problem(); early.join()\n"
        "print(len(probes))\n"
    )
    assert _probe(code) == ["1"]
