"""An offline demo: a scripted model behind a real server that speaks the OpenAI and the Anthropic
protocols, and a demo MCP server.

Everything else is real: kernels, MCP connections, approvals, and pydantic-ai's OpenAI chat
model (the main agent) and Anthropic model (the demo's `reviewer` agent type) talking HTTP to
the server. `freeact-sub --demo` uses it, and so do the end-to-end tests::

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .server import DemoServer, start_demo_server
from .tasks import DEMO_ANTHROPIC_MODEL, DEMO_MODEL, PI_TASK, PRIMES_TASK, REVIEW_TASK

if TYPE_CHECKING:
    from freeact_sub.config.agent_config import AgentConfig
    from freeact_sub.config.definitions import AgentType

__all__ = [
    "DEMO_ANTHROPIC_MODEL",
    "DEMO_MCP_SERVER",
    "DEMO_MODEL",
    "PI_TASK",
    "PRIMES_TASK",
    "REVIEW_TASK",
    "DemoServer",
    "demo_agent_types",
    "demo_config",
    "demo_mcp_server",
    "start_demo_server",
]

DEMO_MCP_SERVER: dict[str, Any] = {
    "command": sys.executable, "args": ["-P", str(Path(__file__).with_name("mcp_server.py"))]
}
"""The `mcpServers` entry of the demo MCP server (tools `constant` and `word_count`).

Run as a file, not as `-m freeact_sub.demo.mcp_server`: that imports this package first (~0.25 s of CPU, for a server
that needs only `mcp`), at every start, and a `--demo` run starts several. `-P`: the file's folder is not put on
`sys.path` (its `openai.py` and `anthropic.py` would hide the real packages)."""


def demo_mcp_server(server: DemoServer) -> dict[str, Any]:
    """The `mcpServers` entry of the demo MCP server that `server` serves itself, over streamable HTTP at
    `server.mcp_url`: what `--demo` and `demo_config()` use. No process starts for it, for the main agent or
    for any subagent (each opens an MCP session of its own). `DEMO_MCP_SERVER` is the same server over stdio."""
    return {"url": server.mcp_url}


def demo_agent_types(server: DemoServer) -> dict[str, AgentType]:
    """The demo's agent types: `reviewer`, on the Anthropic protocol of `server`.

    Its model is `anthropic:claude-demo` (pydantic-ai's Anthropic model, pointed at the server
    with `base_url`), while the main agent talks to the same server over the OpenAI protocol: a
    child on another provider's protocol than its parent. It may only use the demo MCP server's
    `word_count` tool (so it gets no kernel), and its approval rule runs that tool without asking.
    """
    from freeact_sub.config.definitions import AgentType

    return {
        "reviewer": AgentType(
            description="Reviews a short text for a newcomer and counts its words. No kernel; Anthropic protocol.",
            prompt="You are a reviewer. Check the text you are given with your tools and answer in one sentence.",
            model=f"anthropic:{DEMO_ANTHROPIC_MODEL}",
            base_url=server.base_url_for("anthropic"),
            tools=["demo_word_count"],
            approvals={"demo_word_count": "allow"},
        )
    }


def demo_config(server: DemoServer, **overrides: Any) -> AgentConfig:
    """An `AgentConfig` whose model is the scripted demo model at `server`, with the demo MCP server as `demo`
    (served by `server` too: `demo_mcp_server()`) and the demo's agent types (`demo_agent_types()`).

    Keyword arguments override any field, e.g. `demo_config(server, working_dir=tmp, auto_approve=True)`;
    `agents=` adds types to the demo's (replacing one of the same name).
    """
    from freeact_sub.config.agent_config import AgentConfig

    values: dict[str, Any] = {
        "model": DEMO_MODEL,
        "base_url": server.base_url_for("openai"),
        "mcp_servers": {"demo": demo_mcp_server(server)},
    }
    agents = {**demo_agent_types(server), **dict(overrides.pop("agents", None) or {})}
    values.update(overrides, agents=agents)
    return AgentConfig.validated(values, source="demo configuration")
