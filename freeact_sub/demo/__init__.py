"""An offline demo: a scripted model behind a real OpenAI-compatible server, and a demo MCP server.

Everything else is real: kernels, MCP connections, approvals, and pydantic-ai's OpenAI chat
model talking HTTP to the server. `freeact-sub --demo` uses it, and so do the end-to-end tests::

    from freeact_sub import Agent
    from freeact_sub.demo import demo_config, start_demo_server

    with start_demo_server() as server:
        async with Agent(demo_config(server)) as agent:
            async for event in agent.stream("Show me what you can do"):
                ...

What the scripted model does is described in `freeact_sub.demo.scenario`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from .scenario import DEMO_MODEL, PI_TASK, PRIMES_TASK
from .server import DemoServer, start_demo_server

if TYPE_CHECKING:
    from freeact_sub.config import AgentConfig

__all__ = ["DEMO_MCP_SERVER", "DEMO_MODEL", "PI_TASK", "PRIMES_TASK", "DemoServer", "demo_config", "start_demo_server"]

DEMO_MCP_SERVER: dict[str, Any] = {"command": sys.executable, "args": ["-m", "freeact_sub.demo.mcp_server"]}
"""The `mcpServers` entry of the demo MCP server (tools `constant` and `word_count`)."""


def demo_config(server: DemoServer, **overrides: Any) -> AgentConfig:
    """An `AgentConfig` whose model is the scripted demo model at `server`, with the demo MCP server as `demo`.

    Keyword arguments override any field, e.g. `demo_config(server, working_dir=tmp, auto_approve=True)`.
    """
    from freeact_sub.config import AgentConfig

    values: dict[str, Any] = {
        "model": DEMO_MODEL,
        "base_url": server.base_url,
        "mcp_servers": {"demo": dict(DEMO_MCP_SERVER)},
    }
    values.update(overrides)
    return AgentConfig.validated(values, source="demo configuration")
