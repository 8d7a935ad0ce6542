"""Typed subagents with real kernels, a real MCP server and scripted models.

The parent starts, in one response, a child of a kernel-less MCP-only type on a model of its
own, a child whose approval rules allow one MCP tool and deny another, a `general` child, and
a call naming an unknown type.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, SystemPromptPart

from freeact_sub import (
    Agent,
    AgentConfig,
    AgentType,
    AgentEvent,
    ApprovalRequest,
    ConfigError,
    SubagentStarted,
    ToolOutput,
)
from tests.processes import kernel_processes
from tests.scripting import Call, Router, Script, tool_results


def system_prompt(messages: list[ModelMessage]) -> str:
    return next(p.content for m in messages for p in getattr(m, "parts", []) if isinstance(p, SystemPromptPart))


def echo_results(messages: list[ModelMessage]) -> list[Any]:
    return [" | ".join(f"{k}={v}" for k, v in sorted(tool_results(messages).items()))]


async def test_three_typed_children_in_one_response(workdir: Path, calc_server_config: dict) -> None:
    parent = Script(
        [
            Call(
                "task",
                {"prompt": "CHILD-mcp: add 2 and 3", "subagent_type": "adder", "description": "Add two numbers"},
                id="t-mcp",
            ),
            Call("task", {"prompt": "CHILD-reader: look", "subagent_type": "reader"}, id="t-reader"),
            Call("task", {"prompt": "CHILD-general: run code"}, id="t-general"),
            Call("task", {"prompt": "CHILD-none: x", "subagent_type": "nope"}, id="t-nope"),
        ],
        echo_results,
    )
    reader = Script(
        [
            Call("calc_echo", {"text": "hi"}, id="r-echo"),
            Call("calc_add", {"a": 1, "b": 1}, id="r-add"),
            Call("execute_ipython_cell", {"code": "print('read')"}, id="r-cell"),
        ],
        echo_results,
    )
    general = Script([Call("execute_ipython_cell", {"code": "print(6*7)"}, id="g-cell")], echo_results)
    adder = Script([Call("calc_add", {"a": 2, "b": 3}, id="a-add")], echo_results)
    adder.model._model_name = "adder-model"  # the name the child's model reports
    model = Router({"PARENT": parent, "CHILD-reader:": reader, "CHILD-general:": general})
    types = {
        "adder": AgentType(
            description="Adds numbers with the calc server.",
            prompt="You add numbers.",
            model=adder.model,
            tools=["calc_*"],
            mcp_servers={"calc": calc_server_config},
            max_turns=3,
        ),
        "reader": {
            "description": "Reads only.",
            "prompt": "You only read.",
            "mcpServers": {"calc": calc_server_config},
            "approvals": {"calc_echo": "allow", "calc_add": "deny"},
        },
    }
    config = AgentConfig(
        model=model.model,
        working_dir=workdir,
        kernel_pool_size=0,
        agents=types,
        approvals={"calc_*": "allow"},  # (a global deny of calc_echo would win: tests/security)
        save_sessions=False,
    )
    asked: list[ApprovalRequest] = []
    kernels_of: dict[str, Any] = {}
    events: list[AgentEvent] = []
    async with Agent(config) as agent:
        async with asyncio.timeout(120):
            async for event in agent.stream("PARENT"):
                events.append(event)
                record = agent.tree.agents.get(event.agent_id)
                if record is not None and event.agent_id != agent.agent_id:
                    kernels_of.setdefault(event.agent_id, getattr(record.agent, "kernel", None))
                if isinstance(event, ApprovalRequest) and not event.decided:
                    asked.append(event)
                    event.approve(True)

    started = {e.tool_call_id: e for e in events if isinstance(e, SubagentStarted)}
    assert set(started) == {"t-mcp", "t-reader", "t-general"}
    assert (started["t-mcp"].agent_type, started["t-mcp"].description, started["t-mcp"].model) == (
        "adder",
        "Add two numbers",
        "adder-model",
    )
    assert started["t-mcp"].max_turns == 3  # the type's limit
    assert (started["t-general"].agent_type, started["t-general"].model) == ("general", "scripted-router")
    assert started["t-general"].max_turns == 10

    # the kernel-less child: no kernel, only its MCP tools, its own prompt, its own model
    mcp_child = started["t-mcp"].subagent_id
    assert kernels_of[mcp_child] is None
    offered = sorted(t.name for t in adder.infos[0].function_tools)
    assert offered and all(name.startswith("calc_") for name in offered)
    assert system_prompt(adder.requests[0]).count("## Your role\n\nYou add numbers.") == 1
    assert adder.requests[0][0].parts[-1].content == "CHILD-mcp: add 2 and 3"  # type: ignore[attr-defined]
    assert len(adder.requests[0]) == 1, "a fresh history: only the system prompt and the job"

    # the read-only child: `allow` decided without asking, `deny` never run, the cell asked
    reader_id = started["t-reader"].subagent_id
    assert kernels_of[reader_id] is not None
    requests = [e for e in events if isinstance(e, ApprovalRequest) and e.agent_id == reader_id]
    by_name = {r.tool_name: r for r in requests}
    assert by_name["calc_echo"].auto_approved and by_name["calc_echo"].rule == "'calc_echo': allow (agent type reader)"
    assert by_name["calc_add"].decision is False and "deny" in (by_name["calc_add"].rule or "")
    assert [r.tool_name for r in asked if r.agent_id == reader_id] == ["execute_ipython_cell"]
    results = reader.tool_results(1)
    assert results["r-echo"] == "hi"
    assert "An approval rule refused this call to `calc_add`" in results["r-add"]
    assert not any(isinstance(e, ToolOutput) and e.tool_call_id == "r-add" and not e.is_error for e in events)
    assert "## Your role\n\nYou only read." in system_prompt(reader.requests[0])
    assert "task" not in [t.name for t in reader.infos[0].function_tools]

    # the parent got every result back, and the unknown type's call lists the known ones
    back = parent.tool_results(1)
    assert back["t-mcp"] == "a-add=5" and back["t-general"].strip() == "g-cell=42"
    assert back["t-nope"].startswith("Unknown subagent_type 'nope'") and "`adder`" in back["t-nope"]
    assert "`general`" in back["t-nope"] and "`reader`" in back["t-nope"]
    task_description = next(t.description for t in parent.infos[0].function_tools if t.name == "task")
    assert "- `adder`: Adds numbers with the calc server." in (task_description or "")


async def test_the_main_agent_runs_as_a_type(workdir: Path) -> None:
    script = Script([Call("reset_kernel", {}, id="reset")], ["done"])
    config = AgentConfig(
        model=script.model,
        working_dir=workdir,
        enable_subagents=False,
        save_sessions=False,
        agent="careful",
        agents={"careful": {"description": "Careful.", "prompt": "Be careful.", "approvals": {"reset_*": "deny"}}},
    )
    async with Agent(config) as agent:
        assert agent.agent_type == "careful"
        async for event in agent.stream("go"):
            assert not (isinstance(event, ApprovalRequest) and not event.decided), "nobody is asked"
    assert "## Your role\n\nBe careful." in system_prompt(script.requests[0])
    assert "An approval rule refused" in script.tool_results(1)["reset"]


async def test_a_kernel_less_main_agent_starts_no_kernel(workdir: Path, calc_server_config: dict) -> None:
    script = Script(["hello"])
    config = AgentConfig(
        model=script.model,
        working_dir=workdir,
        save_sessions=False,
        disallowed_tools=["execute_ipython_cell", "task"],
        mcp_servers={"calc": calc_server_config},
    )
    async with Agent(config) as agent:
        assert agent.kernel is None and kernel_processes() == []
        assert agent.tool_names and all(name.startswith("calc_") for name in agent.tool_names)
        async for _ in agent.stream("hi"):
            pass
    # it is not told to use tools it does not have
    prompt = system_prompt(script.requests[0])
    for absent in ("execute_ipython_cell", "reset_kernel", "IPython kernel", "`task`"):
        assert absent not in prompt, absent
    assert "calc_" in prompt or "tools" in prompt


async def test_a_bad_type_is_reported_before_any_kernel_starts(workdir: Path) -> None:
    script = Script()
    unknown = AgentConfig(model=script.model, working_dir=workdir, agent="ghost", save_sessions=False)
    known = "explore, general, plan, review"
    with pytest.raises(ConfigError, match=rf"agent: unknown agent type 'ghost'; the known types are {known}"):
        await Agent(unknown).start()
    folder = workdir / ".freeact-sub" / "agents"
    folder.mkdir(parents=True)
    (folder / "broken.md").write_text("---\ndescription: x\nmaxTurns: lots\n---\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.md: agent type 'broken':\n  maxTurns"):
        await Agent(AgentConfig(model=script.model, working_dir=workdir, save_sessions=False)).start()
    assert kernel_processes() == []


@pytest.mark.parametrize(
    ("agents", "mcp_servers", "message"),
    [
        ({"odd": {"description": "x", "model": "nosuch:model-1"}}, {}, r"agent type 'odd': model 'nosuch:model-1'"),
        ({"local": {"description": "x", "model": "llama3.2"}}, {}, r"agent type 'local': model 'llama3.2'"),
        (
            {"keyed": {"description": "x", "model": "openai:gpt-4.1", "base_url": "http://127.0.0.1:9/v1",
                       "api_key_env": "FREEACT_SUB_TEST_NO_SUCH_KEY"}},
            {},
            r"agent type 'keyed': api_key_env: the environment variable FREEACT_SUB_TEST_NO_SUCH_KEY is not set",
        ),
        (
            {"files": {"description": "x", "mcpServers": {"fs": {"command": "no-such-mcp-server-binary"}}}},
            {},
            r"agent type 'files': mcp_servers\.fs\.command: 'no-such-mcp-server-binary' is not found",
        ),
        ({}, {"gone": {"command": "/no/such/dir/server"}}, r"mcp_servers\.gone\.command: '/no/such/dir/server'"),
        (
            {"talker": {"description": "x", "tools": ["calc_*"], "mcpTools": "code",
                        "mcpServers": {"calc": {"command": sys.executable, "args": ["-c", "pass"]}}}},
            {},
            r"agent type 'talker': mcp_tools is 'code', but the type cannot run code",
        ),
    ],
    ids=["unknown-prefix", "bare-model-without-base-url", "missing-key-variable", "type-server-command",
         "server-command", "code-tools-without-kernel"],
)
async def test_a_type_or_server_that_could_not_start_is_a_config_error_at_start(
    workdir: Path, agents: dict[str, Any], mcp_servers: dict[str, Any], message: str
) -> None:
    script = Script()
    config = AgentConfig(model=script.model, working_dir=workdir, save_sessions=False, agents=agents,
                         mcp_servers=mcp_servers)
    with pytest.raises(ConfigError, match=message):
        await Agent(config).start()
    assert kernel_processes() == [], "reported before any kernel starts"
    assert script.calls == 0


async def test_an_agent_starts_only_the_mcp_servers_its_tool_patterns_can_use(
    workdir: Path, calc_server_config: dict, time_server_config: dict
) -> None:
    """A child typed `tools: [calc_*]` connects to calc only: no `mcp-server-time` process is started for it."""
    import psutil

    marks = {"calc": "calc_server", "time": "mcp_server_time"}

    def servers_running() -> set[str]:
        names = set()
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                command = " ".join(child.cmdline())
                names |= {name for name, mark in marks.items() if mark in command}
        return names

    seen: list[set[str]] = []

    def child_step(messages: list[ModelMessage]) -> list[str]:
        seen.append(servers_running())
        return ["done"]

    parent = Script([Call("task", {"prompt": "CHILD-add: add", "subagent_type": "adder"})], ["ok"])
    router = Router({"CHILD-add": Script(child_step), "go": parent})
    config = AgentConfig(
        model=router.model,
        working_dir=workdir,
        save_sessions=False,
        mcp_pool_size=0,
        mcp_servers={"calc": calc_server_config, "time": time_server_config},
        disallowed_tools=["time_*"],  # the main agent does not use time either
        agents={"adder": AgentType(description="adds", tools=["calc_*"])},
        auto_approve=True,
    )
    async with Agent(config) as agent:
        assert servers_running() == {"calc"}
        assert not any(name.startswith("time_") for name in agent.tool_names)
        async for _ in agent.stream("go"):
            pass
    assert seen == [{"calc"}], "while the child ran, only calc servers were running (its own and its parent's)"


async def test_a_tool_pattern_that_matches_no_tool_is_warned_about_at_start(
    workdir: Path, calc_server_config: dict
) -> None:
    config = AgentConfig(model=Script().model, working_dir=workdir, save_sessions=False, enable_subagents=False,
                         mcp_servers={"calc": calc_server_config}, tools=["execute_ipython_cell", "calc_ad"],
                         disallowed_tools=["calc_ech*", "calc_echoo"])
    with pytest.warns(UserWarning) as caught:
        async with Agent(config):
            pass
    said = [str(w.message) for w in caught if "matches no tool" in str(w.message)]
    assert len(said) == 2 and "tools pattern 'calc_ad'" in said[0]
    assert "disallowed_tools pattern 'calc_echoo'" in said[1]
    assert "calc_add" in said[0]  # the tools it does have, to spot the typo


async def test_children_of_one_model_and_connection_share_one_resolved_model(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resolving a provider's model costs ~20 ms and a client of its own: the tree does it once per connection."""
    monkeypatch.setenv("SHARED_TEST_KEY", "test-key")
    agent = Agent(AgentConfig(model="test", working_dir=workdir))
    tree = agent.tree
    first = AgentConfig(model="openai:gpt-4o", base_url="http://127.0.0.1:9/v1", api_key_env="SHARED_TEST_KEY")
    same = first.model_copy()
    elsewhere = first.model_copy(update={"base_url": "http://127.0.0.1:10/v1"})
    model = tree.supplies.resolve_model(first)
    assert tree.supplies.resolve_model(same) is model
    assert tree.supplies.resolve_model(elsewhere) is not model
    assert type(model).__name__ == "OpenAIChatModel" and model.model_name == "gpt-4o"
