"""A child never gets a tool its parent's configuration left out: a type's `tools` meet the parent's."""

from __future__ import annotations

from pathlib import Path

from freeact_sub import AgentConfig
from freeact_sub.config.definitions import AgentType
from freeact_sub.config.type_config import configure
from freeact_sub.tools.names import tool_allowed


def test_a_child_types_tools_cannot_offer_what_its_parent_left_out(tmp_path: Path) -> None:
    parent = AgentConfig(model="test", working_dir=tmp_path, tools=["execute_ipython_cell", "github_search"])
    wider = AgentType(description="asks for more", tools=["execute_ipython_cell", "shell_run", "github_*"])
    child = configure(parent, wider, "wider")
    offered = {
        name: tool_allowed(name, child.tools, child.disallowed_tools)
        for name in ("execute_ipython_cell", "shell_run", "github_search", "github_delete_repo")
    }
    assert offered == {
        "execute_ipython_cell": True,
        "shell_run": False,
        "github_search": True,
        "github_delete_repo": False,
    }
    # a parent that allows everything lets the type choose; a type without `tools` keeps the parent's
    assert configure(AgentConfig(model="test", working_dir=tmp_path), wider, "wider").tools == wider.tools
    assert configure(parent, AgentType(description="plain"), "plain").tools == parent.tools
