"""Importing the package stays cheap: the heavy libraries load when an agent starts, not before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_importing_freeact_sub_does_not_load_pydantic_ai_or_jsonschema() -> None:
    probe = "import sys, freeact_sub; print(sorted({'pydantic_ai', 'jsonschema'} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_tool_definitions_are_still_validated_when_used() -> None:
    from freeact_sub.tools import Toolbox, builtin_tool

    box = Toolbox([builtin_tool("execute_ipython_cell")])
    assert box.check("execute_ipython_cell", {"code": "1"}) is None
    assert "code" in (box.check("execute_ipython_cell", {}) or "")


def test_jsonschema_is_imported_without_the_iri_grammar_and_the_grammar_still_imports_after() -> None:
    """rfc3987-syntax (jupyterlab's extras install it) builds 38 parsers when jsonschema imports it: ~2 s a process."""
    code = (
        "import importlib.util, sys\n"
        "from freeact_sub.tools import Toolbox, builtin_tool\n"
        "Toolbox([builtin_tool('execute_ipython_cell')])\n"
        "print('jsonschema' in sys.modules, 'rfc3987_syntax' in sys.modules)\n"
        "if importlib.util.find_spec('rfc3987_syntax') is not None:\n"
        "    import rfc3987_syntax\n"
        "print('importable after')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["True", "False", "importable", "after"], done.stdout + done.stderr


def test_a_one_shot_without_a_terminal_never_loads_prompt_toolkit() -> None:
    """Its session and runner are imported; keys are read only from a terminal, so prompt_toolkit (0.2 s) is not."""
    probe = ("import sys, freeact_sub.terminal.runner, freeact_sub.terminal.session, freeact_sub.terminal.keys; "
             "print('prompt_toolkit' in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "False"


def test_the_terminal_checks_a_model_at_a_base_url_without_importing_its_sdk(tmp_path: Path) -> None:
    """The SDK (pydantic-ai, `openai`: ~2 s of CPU) is imported by the agent's start, beside its kernel's boot."""
    probe = (
        "import sys, pathlib\n"
        "from freeact_sub.terminal.arguments import build_parser\n"
        "from freeact_sub.terminal.runner import Runner\n"
        "runner = Runner(build_parser().parse_args(['--demo', '-p', 'x', '--auto-approve']))\n"
        f"config = runner._configure(pathlib.Path({str(tmp_path)!r}))\n"
        "runner.demo.close()\n"
        "print(config.base_url is not None, sorted({'pydantic_ai', 'openai'} & set(sys.modules)))\n"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                           stdin=subprocess.DEVNULL).stdout
    assert shown.strip() == "True []"
