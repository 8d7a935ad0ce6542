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
