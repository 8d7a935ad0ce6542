"""The root package imports its public names on first use: `import freeact_sub` costs nothing heavy, and every
name in `__all__` is where the root says it is (for type checkers too)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import freeact_sub

ROOT = Path(freeact_sub.__file__)


def test_importing_the_package_imports_none_of_the_heavy_libraries() -> None:
    probe = (
        "import sys, freeact_sub\n"
        "print(sorted({'pydantic_ai', 'pydantic', 'jupyter_client', 'mcp', 'httpx', 'rich'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_every_public_name_resolves_and_is_listed_for_type_checkers() -> None:
    tree = ast.parse(ROOT.read_text())
    checked = next(node for node in tree.body if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
    for_type_checkers = {
        alias.asname or alias.name: "." * node.level + (node.module or "")
        for node in checked.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    public = set(freeact_sub.__all__) - {"__version__"}
    assert for_type_checkers == freeact_sub._WHERE  # the static list and the run-time map name the same modules
    assert set(freeact_sub._WHERE) == public
    for name in sorted(public):
        value = getattr(freeact_sub, name)
        module = sys.modules["freeact_sub" + freeact_sub._WHERE[name]]
        assert getattr(module, name) is value, name
    assert freeact_sub.__version__
    assert set(dir(freeact_sub)) >= public


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        freeact_sub.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")
