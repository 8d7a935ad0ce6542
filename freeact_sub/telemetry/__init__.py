"""OpenTelemetry traces and metrics of an agent tree: one trace per run, nested as the work was.

Off by default and free when off: nothing here imports the OpenTelemetry SDK or starts a thread
unless `AgentConfig(telemetry=True)`, `--telemetry` or `OTEL_EXPORTER_OTLP_ENDPOINT` turns it on
(`switch.wanted`). On, `switch.open_telemetry` returns a `Telemetry` the tree holds; the agent's
parts open its spans (a run, a turn, a tool call) and hand it their events (`Telemetry.observe`).

The span tree::

    invoke_agent <type>             one `stream()` call of one agent (agent_id, parent_agent_id, tokens, cost)
    └── turn <n>                    one model round and its tool calls
        ├── chat <model>            pydantic-ai's own model request span (GenAI conventions)
        ├── execute_tool execute_ipython_cell
        │   ├── execute_tool <mcp tool>   an MCP tool the cell's code called
        │   └── execute_tool task         a child the cell's code started
        │       └── invoke_agent <type>   that child's run
        └── execute_tool task       a `task` call (foreground or background)
            └── invoke_agent <type>       the child's run, under the call that started it

A child's run finds its parent by ids (the parent agent and the call that started it), not by
the task it runs in, so background children and children from code land where they belong.
"""

from __future__ import annotations

from .switch import open_telemetry, wanted

__all__ = ["open_telemetry", "wanted"]
