"""The generated `mcptools` sources: valid Python, typed keyword arguments, docstrings, names mapped back."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from freeact_sub.code_tools.generate import identifier, write_package
from freeact_sub.mcp.connection import McpTool


def tool(name: str, schema: dict, description: str = "", output: dict | None = None) -> McpTool:
    server = "my-server"
    return McpTool(server=server, name=name, qualified_name=f"{server}_{name}", description=description,
                   input_schema=schema, output_schema=output)


def test_names_become_identifiers_that_do_not_collide() -> None:
    assert identifier("get-current-time") == "get_current_time"
    assert identifier("from") == "from_"
    assert identifier("2fa") == "_2fa"
    assert identifier("a.b", taken=["a_b"]) == "a_b_2"


def test_modules_are_valid_python_with_typed_keyword_arguments(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {
            "from": {"type": "string", "description": 'Where to start; may contain """ and \\ safely.'},
            "max-results": {"type": "integer", "default": 10},
            "mode": {"enum": ["fast", "exact"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "note": {"anyOf": [{"type": "string", "description": "An optional note."}, {"type": "null"}]},
        },
        "required": ["from"],
    }
    wrapped = {"type": "object", "properties": {"result": {"type": "number"}}, "required": ["result"]}
    modules = write_package(tmp_path, [
        tool("search-items", schema, "Search things.\n\nSecond paragraph."),
        tool("total", {"type": "object", "properties": {}}, output=wrapped),
    ])
    assert [(m.module, m.functions) for m in modules] == [
        ("my_server", {"search_items": "search-items", "total": "total"})
    ]
    source = (tmp_path / "mcptools" / "my_server.py").read_text()
    ast.parse(source)
    assert (
        "def search_items(*, from_: str, max_results: int = 10, mode: Literal['fast', 'exact'] | None = None, "
        "tags: list[str] | None = None, note: str | None = None) -> str:"
    ) in source
    assert "'from': from_, 'max-results': max_results" in source  # the server's own names are sent
    assert "omit_none=('mode', 'tags', 'note')" in source
    assert "note: An optional note." in source and "Second paragraph." in source
    assert "def total() -> float:" in source and "unwrap=True" in source
    sys.path.insert(0, str(tmp_path))
    try:
        import mcptools.my_server as module

        assert "Where to start; may contain" in (module.search_items.__doc__ or "")
        assert issubclass(__import__("mcptools").ToolArgumentError, TypeError)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n == "mcptools" or n.startswith("mcptools.")]:
            del sys.modules[name]
