"""Typed subagents across providers, end to end, over the real protocols.

The parent talks to the scripted OpenAI chat-completions server; in one response it starts three
children of three types: one on the Anthropic Messages protocol (its own scripted server,
through pydantic-ai's own Anthropic model with `base_url`), one MCP-only without a kernel, and
one that is read-only by approval rules. What each child was sent is read from the servers'
own request logs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from freeact_sub import Agent, AgentConfig, AgentType, ApprovalRequest, SubagentStarted
from freeact_sub.demo import start_demo_server
from freeact_sub.demo.scenario import Reply, ToolCall
from tests.scripting import drive, note_kernels


def first_user(messages: list[Mapping[str, Any]]) -> str:
    return next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")


def results(messages: list[Mapping[str, Any]]) -> list[str]:
    return [str(m.get("content")) for m in messages if m.get("role") == "tool"]


def respond(body: Mapping[str, Any]) -> Reply:
    messages = body["messages"]
    prompt, done = first_user(messages), results(messages)
    if prompt == "PARENT":
        if done:
            return Reply(text="ALL: " + " | ".join(done))
        return Reply(
            tool_calls=(
                ToolCall(
                    "task",
                    {"prompt": "CHILD-claude: compute", "subagent_type": "claude", "description": "Compute on Claude"},
                    id="t-claude",
                ),
                ToolCall("task", {"prompt": "CHILD-mcp: add", "subagent_type": "adder"}, id="t-mcp"),
                ToolCall("task", {"prompt": "CHILD-read: look", "subagent_type": "reader"}, id="t-read"),
            )
        )
    if prompt.startswith("CHILD-claude"):
        if done:
            return Reply(reasoning="The cell printed it.", text=f"claude got {done[-1].strip()}")
        return Reply(tool_calls=(ToolCall("execute_ipython_cell", {"code": "print(6 * 7)"}, id="c-cell"),))
    if prompt.startswith("CHILD-mcp"):
        if done:
            return Reply(text=f"sum {done[-1]}")
        return Reply(tool_calls=(ToolCall("calc_add", {"a": 2, "b": 3}, id="m-add"),))
    if prompt.startswith("CHILD-read"):
        if done:
            return Reply(text="read " + " / ".join(d[:60] for d in done))
        return Reply(
            tool_calls=(
                ToolCall("calc_echo", {"text": "hi"}, id="r-echo"),
                ToolCall("calc_add", {"a": 1, "b": 1}, id="r-add"),
            )
        )
    raise AssertionError(f"no script for {prompt!r}")


def tool_names_openai(body: Mapping[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in body.get("tools") or [])


async def test_a_parent_on_openai_starts_three_typed_children(workdir: Path, calc_server_config: dict) -> None:
    openai = start_demo_server(chunk_delay=0, responder=respond)
    anthropic = start_demo_server(chunk_delay=0, protocol="anthropic", responder=respond)
    try:
        types = {
            "claude": AgentType(
                description="Runs code on Claude.",
                prompt="You are the Claude child.",
                model="anthropic:claude-scripted",
                base_url=anthropic.base_url,
                disallowed_tools=["calc_*"],
            ),
            "adder": AgentType(description="Adds with MCP only.", prompt="You only add.", tools=["calc_add"]),
            "reader": AgentType(
                description="Reads only.", prompt="You only read.", approvals={"calc_echo": "allow", "calc_add": "deny"}
            ),
        }
        config = AgentConfig(
            model="gpt-scripted",
            base_url=openai.base_url,
            working_dir=workdir,
            agents=types,
            mcp_servers={"calc": calc_server_config},
            kernel_pool_size=0,
            save_sessions=False,
        )
        asked: list[ApprovalRequest] = []
        kernels: dict[str, Any] = {}
        async with Agent(config) as agent:
            events = await drive(agent.stream("PARENT"), lambda request: asked.append(request) or True,
                                 on_event=note_kernels(agent, kernels), limit=120)
            answer = agent.history[-1]
    finally:
        openai.close()
        anthropic.close()

    started = {e.tool_call_id: e for e in events if isinstance(e, SubagentStarted)}
    assert {k: (e.agent_type, e.model) for k, e in started.items()} == {
        "t-claude": ("claude", "claude-scripted"),
        "t-mcp": ("adder", "gpt-scripted"),
        "t-read": ("reader", "gpt-scripted"),
    }
    assert started["t-claude"].description == "Compute on Claude"

    # the Anthropic child: its model name, its system prompt, its tools, a fresh history
    (first_claude, *_) = [b for b in anthropic.requests if "CHILD-claude" in json.dumps(b["messages"][0])]
    assert first_claude["model"] == "claude-scripted" and first_claude["stream"] is True
    system = first_claude["system"] if isinstance(first_claude["system"], str) else first_claude["system"][0]["text"]
    assert "execute_ipython_cell" in system and "## Your role\n\nYou are the Claude child." in system
    assert sorted(t["name"] for t in first_claude["tools"]) == ["execute_ipython_cell", "reset_kernel", "task_report"]
    assert len(first_claude["messages"]) == 1, "a fresh history: only the job"
    assert all("CHILD-claude" in json.dumps(b["messages"][0]) for b in anthropic.requests), "only the child there"

    # the children on the OpenAI server
    def first_of(key: str) -> dict[str, Any]:
        return next(b for b in openai.requests if first_user(b["messages"]).startswith(key))

    mcp_only, reader, parent = first_of("CHILD-mcp"), first_of("CHILD-read"), first_of("PARENT")
    assert tool_names_openai(mcp_only) == ["calc_add"]
    assert kernels[started["t-mcp"].subagent_id] is None, "no kernel process for a type without code"
    assert "## Your role\n\nYou only add." in mcp_only["messages"][0]["content"]
    assert [m["role"] for m in mcp_only["messages"]] == ["system", "user"]
    assert "task" not in tool_names_openai(reader) and "execute_ipython_cell" in tool_names_openai(reader)
    assert "task" in tool_names_openai(parent)
    task_tool = next(t for t in parent["tools"] if t["function"]["name"] == "task")
    assert "- `claude`: Runs code on Claude." in task_tool["function"]["description"]

    # rules: allow decided and marked, deny never run and nobody asked
    read_id = started["t-read"].subagent_id
    decided = {e.tool_name: e for e in events if isinstance(e, ApprovalRequest) and e.agent_id == read_id}
    assert decided["calc_echo"].auto_approved and decided["calc_echo"].rule == "'calc_echo': allow (agent type reader)"
    assert decided["calc_add"].decision is False and decided["calc_add"].rule
    assert not [a for a in asked if a.agent_id == read_id]
    last_read = [b for b in openai.requests if first_user(b["messages"]).startswith("CHILD-read")][-1]
    read_results = results(last_read["messages"])
    assert read_results[0] == "hi" and "An approval rule refused this call to `calc_add`" in read_results[1]

    # the results came back to the parent
    final = [b for b in openai.requests if first_user(b["messages"]) == "PARENT"][-1]
    back = " | ".join(results(final["messages"]))
    assert "claude got 42" in back and "sum 5" in back and "read hi" in back
    assert "ALL:" in str(answer)
