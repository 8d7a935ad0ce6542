"""While the agent starts, the notebook says what it waits for (issue 40, item 38): a cold start takes seconds, and
the run's header and the main agent's badge name each step as it comes. A real agent, kernel and MCP server."""

from __future__ import annotations

from pathlib import Path

import pytest

from freeact_sub import Agent
from freeact_sub.notebook import AgentView
from tests.scripting import Script, configs

pytestmark = pytest.mark.timeout(120)

config = configs(auto_approve=True, kernel_pool_size=0, mcp_pool_size=0, enable_subagents=False)


async def test_the_view_names_each_step_of_the_start_as_it_comes(workdir: Path, calc_server_config: dict) -> None:
    agent = Agent(config(Script(["ready"]).model, workdir, mcp_servers={"calc": calc_server_config}))
    try:
        view = AgentView(agent)
        await view.run("hi")
        assert view.panel is not None and view.answer == "ready"
        steps = view.panel.start_steps
        assert steps[:2] == ["starting the agent", "loading the model"], steps
        assert "starting the kernel and connecting the MCP servers: calc" in steps, steps
        assert steps[-1] == "preparing the code tools in the kernel", steps
        assert view.panel.main.model_note == ""  # the start is over: the badge no longer says what it waits for
    finally:
        await agent.stop()
