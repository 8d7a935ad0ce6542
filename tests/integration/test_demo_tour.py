"""The demo scenario end to end through the real Agent: kernels, MCP server, HTTP model server (both protocols)."""

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
from freeact_sub.demo import DEMO_ANTHROPIC_MODEL, DEMO_MODEL, REVIEW_TASK, demo_config, start_demo_server
from tests.scripting import drive, note_kernels


async def test_tour_calls_mcp_from_code_runs_three_parallel_subagents_one_on_anthropic_and_reports_a_rejection(
    workdir: Path,
) -> None:
    kernels: dict[str, object] = {}
    with start_demo_server(chunk_delay=0) as server:
        async with Agent(demo_config(server, working_dir=workdir, kernel_pool_size=0)) as agent:
            main_id = agent.agent_id
            events = await drive(agent.stream("Show me the tour"), lambda request: "sieve" not in (request.code or ""),
                                 on_event=note_kernels(agent, kernels))  # reject the primes subagent's cell only
        anthropic = list(server.requests_by_protocol["anthropic"])
        openai = list(server.requests_by_protocol["openai"])

    started = [e for e in events if isinstance(e, SubagentStarted)]
    finished = {e.subagent_id: e.status for e in events if isinstance(e, SubagentFinished)}
    assert len(started) == 3 and set(finished) == {e.subagent_id for e in started}
    assert sorted(finished.values()) == ["done", "done", "rejected"]
    thinkers = {e.agent_id for e in events if isinstance(e, Thoughts)}
    assert thinkers == {main_id, *finished}  # every agent streamed thinking, on either protocol

    # the main agent's cell that calls MCP tools as Python functions: each call asked, approved, answered
    from_code = [e for e in events if isinstance(e, ApprovalRequest) and e.source == "code"]
    assert [(e.agent_id, e.tool_name, e.tool_args, e.decision) for e in from_code] == [
        (main_id, "demo_constant", {"name": "pi"}, True),
        (main_id, "demo_constant", {"name": "e"}, True),
    ]
    code_results = [e for e in events if isinstance(e, ToolOutput) and e.source == "code"]
    assert [e.content[:7] for e in code_results] == ["3.14159", "2.71828"]
    assert {e.cell_call_id for e in (*from_code, *code_results)} == {from_code[0].cell_call_id}
    cell = from_code[0].cell_call_id
    (printed,) = [e for e in events if isinstance(e, CodeExecutionOutput) and e.tool_call_id == cell]
    assert "reference values: pi = 3.141593, e = 2.718282" in printed.text

    # the typed child on the Anthropic protocol: its type, title and model everywhere the events go
    (reviewer,) = [e for e in started if e.agent_type == "reviewer"]
    assert (reviewer.description, reviewer.model) == ("Review the summary", DEMO_ANTHROPIC_MODEL)
    assert reviewer.prompt == REVIEW_TASK
    assert {e.model for e in started if e is not reviewer} == {DEMO_MODEL}
    assert kernels[reviewer.subagent_id] is None, "an MCP-only type gets no kernel"
    assert reviewer.sandbox == "", "a kernel-less type has no sandbox profile to show"
    assert all(e.sandbox for e in started if e is not reviewer)  # the children that run code say theirs
    # the server's own log: every Anthropic request is the reviewer's, sent with its model name and type prompt
    assert len(anthropic) == 2 and {body["model"] for body in anthropic} == {DEMO_ANTHROPIC_MODEL}
    system = anthropic[0]["system"] if isinstance(anthropic[0]["system"], str) else anthropic[0]["system"][0]["text"]
    assert "## Your role\n\nYou are a reviewer." in system
    assert [t["name"] for t in anthropic[0]["tools"]] == ["demo_word_count"]
    assert "Code runs in kernels" in str(anthropic[0]["messages"]) and len(anthropic[0]["messages"]) == 1
    assert all(body["model"] == DEMO_MODEL for body in openai)
    # its one MCP call was allowed by its type's rule: decided, shown, nobody asked
    (allowed,) = [e for e in events if isinstance(e, ApprovalRequest) and e.agent_id == reviewer.subagent_id]
    assert allowed.tool_name == "demo_word_count" and allowed.auto_approved
    assert allowed.rule == "'demo_word_count': allow (agent type reviewer)"

    mcp_calls = [e for e in events if isinstance(e, ToolOutput) and e.tool_name == "demo_constant"]
    mcp_calls = [e for e in mcp_calls if e.source == "model"]
    assert len(mcp_calls) == 1 and mcp_calls[0].content.startswith("3.14159")
    image_cells = [e for e in events if isinstance(e, CodeExecutionOutput) and e.images]
    assert image_cells and image_cells[0].agent_id == main_id and image_cells[0].images[0].is_file()
    final = [e for e in events if isinstance(e, Response) and e.final and e.agent_id == main_id]
    assert len(final) == 1
    answer = final[0].content
    assert "rejected" in answer and "π ≈ 3.1" in answer
    assert "(pi = 3.141593, e = 2.718282)" in answer
    assert "**Review (`reviewer`, Anthropic protocol):** The summary has 15 words: short enough" in answer


async def test_the_tours_summary_reads_a_rejected_tool_call_from_code_as_an_outcome_not_a_line_of_code(
    workdir: Path,
) -> None:
    final = ""
    with start_demo_server(chunk_delay=0) as server:
        async with Agent(demo_config(server, working_dir=workdir, kernel_pool_size=0)) as agent:
            async for event in agent.stream("Show me the tour"):
                if isinstance(event, ApprovalRequest) and not event.decided:
                    if event.source == "code" and event.tool_args == {"name": "pi"}:
                        event.reject("not now, please")  # the cell goes on and raises ToolRejected
                    else:
                        event.approve(True)
                if isinstance(event, Response) and event.final and event.agent_id == agent.agent_id:
                    final = event.content
    assert "stopped with `ToolRejected" in final, final
    assert '" + ", ".join' not in final and "f\"{name}" not in final
