"""Importing the package stays cheap: the heavy libraries load when an agent starts, not before."""

from __future__ import annotations

import subprocess
import sys


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
