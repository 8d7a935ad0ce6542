"""The demo scenario end to end through the real Agent: kernels, MCP server, HTTP model server."""

from __future__ import annotations

from pathlib import Path

from freeact_sub import (
    Agent,
    ApprovalRequest,
    CodeExecutionOutput,
    Response,
    SubagentFinished,
    SubagentStarted,
    Thoughts,
    ToolOutput,
)
from freeact_sub.demo import demo_config, start_demo_server


async def test_tour_runs_two_parallel_subagents_and_reports_a_rejection(workdir: Path) -> None:
    events = []
    with start_demo_server(chunk_delay=0) as server:
        async with Agent(demo_config(server, working_dir=workdir, kernel_pool_size=0)) as agent:
            main_id = agent.agent_id
            async for event in agent.stream("Show me the tour"):
                events.append(event)
                if isinstance(event, ApprovalRequest) and not event.decided:
                    code = event.code or ""
                    event.approve("sieve" not in code)  # reject the primes subagent's cell only

    started = [e for e in events if isinstance(e, SubagentStarted)]
    finished = {e.subagent_id: e.status for e in events if isinstance(e, SubagentFinished)}
    assert len(started) == 2 and set(finished) == {e.subagent_id for e in started}
    assert sorted(finished.values()) == ["done", "rejected"]
    thinkers = {e.agent_id for e in events if isinstance(e, Thoughts)}
    assert thinkers == {main_id, *finished}  # every agent streamed thinking
    mcp_calls = [e for e in events if isinstance(e, ToolOutput) and e.tool_name == "demo_constant"]
    assert len(mcp_calls) == 1 and mcp_calls[0].content.startswith("3.14159")
    image_cells = [e for e in events if isinstance(e, CodeExecutionOutput) and e.images]
    assert image_cells and image_cells[0].agent_id == main_id and image_cells[0].images[0].is_file()
    final = [e for e in events if isinstance(e, Response) and e.final and e.agent_id == main_id]
    assert len(final) == 1
    assert "rejected" in final[0].content and "π ≈ 3.1" in final[0].content
