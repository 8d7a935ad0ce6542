"""Names under which MCP tools are offered to the model."""

from __future__ import annotations

from freeact_sub.tools.names import qualified_tool_name


def test_tools_are_named_server_underscore_tool() -> None:
    assert qualified_tool_name("calc", "add") == "calc_add"


def test_qualified_names_are_safe_for_model_apis() -> None:
    assert qualified_tool_name("my server.v2", "do/thing") == "my_server_v2_do_thing"
    assert len(qualified_tool_name("s" * 50, "t" * 50)) <= 64
