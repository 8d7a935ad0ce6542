"""`await view.compact()` in a notebook: the cell that asked shows the readable line and the summary, not the
event's repr, and an earlier run's panel is left as it was.

A real agent with a real kernel and a scripted model (`FunctionModel`, the compaction tests' worker) runs two
cells through a view; a real IPython shell's display publisher receives what the cell would show.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from freeact_sub import Agent, AgentConfig, ContextCompacted
from freeact_sub.notebook import AgentView
from tests.integration.test_compaction import Worker

pytestmark = pytest.mark.timeout(120)


async def test_compact_shows_its_line_and_summary_in_its_own_cell(workdir: Path) -> None:
    InteractiveShell.instance()  # what a notebook's kernel has: `display()` goes to its publisher
    worker = Worker(rounds=2)
    config = AgentConfig(
        model=worker.model,
        working_dir=workdir,
        auto_approve=True,
        kernel_pool_size=0,
        mcp_pool_size=0,
        enable_subagents=False,
        compact_keep_rounds=1,
    )
    try:
        async with Agent(config) as agent:
            view = AgentView(agent)
            with capture_output():
                await view.run("count with cells")
            assert view.answer == "done after 2 cells" and view.panel is not None
            earlier = repr(view.panel.panels[agent.agent_id].children)
            with capture_output() as cell:
                result = await view.compact("the rows")
            assert result is None  # nothing for the cell to print as its value (it printed a raw repr before)
            (shown,) = cell.outputs
            assert "ContextCompacted(" not in shown.data["text/plain"]
            assert (
                "context compacted (asked)" in shown.data["text/html"] and "focus: the rows" in shown.data["text/html"]
            )
            assert "<details><summary>The summary the model wrote</summary>" in shown.data["text/html"]
            assert "SUMMARY 1: cells ran" in shown.data["text/html"]  # readable in the cell, not only a tooltip
            assert isinstance(view.compaction, ContextCompacted) and view.compaction.focus == "the rows"
            assert repr(view.panel.panels[agent.agent_id].children) == earlier  # the last run's panel is untouched
    finally:
        InteractiveShell.clear_instance()
