"""The model per `task` call, within an allowlist: picked, refused, kept on resume, changed on resume, forked.

Every model is a scripted `FunctionModel` of its own name, so which model a child ran on is
which script it was sent to. The agents have no kernels (no `execute_ipython_cell`): only the
`task` calls matter here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage

from freeact_sub import Agent, AgentConfig, ApprovalRequest, ConfigError, SubagentStarted, ToolOutput
from freeact_sub.demo import DemoServer
from freeact_sub.demo.scenario import Reply, ToolCall
from freeact_sub.sessions import open_session
from tests.scripting import Call, Script, drive


async def test_a_listed_model_is_picked_refused_kept_on_resume_and_changed(workdir: Path) -> None:
    fast = Script(["fast: A"], ["fast: A again"], model_name="fast")
    deep = Script(["deep: A once more"], ["deep: fork"], model_name="deep")
    started: list[SubagentStarted] = []

    def resume(prompt: str, **more: Any) -> Any:
        def step(_: list[ModelMessage]) -> list[Any]:
            return [Call("task", {"resume": started[0].subagent_id, "prompt": prompt, **more})]

        return step

    parent = Script(
        [
            Call("task", {"prompt": "A", "model": "fast", "description": "Job A"}, id="t-a"),
            Call("task", {"prompt": "B", "model": "gpt-9"}, id="t-b"),
            Call("task", {"prompt": "C", "subagent_type": "pinned", "model": "fast"}, id="t-c"),
        ],
        resume("A2"),
        resume("A3", model="deep"),
        [Call("task", {"prompt": "F", "fork": True, "model": "deep"}, id="t-f")],
        ["done"],
        model_name="main",
    )
    config = AgentConfig(
        model=parent.model,
        working_dir=workdir,
        disallowed_tools=["execute_ipython_cell"],
        subagent_models=[fast.model, deep.model],
        agents={"pinned": {"description": "Runs on deep only.", "models": [deep.model]}},
    )
    asked: list[str] = []
    async with Agent(config) as agent, asyncio.timeout(60):
        async for event in agent.stream("PARENT"):
            if isinstance(event, SubagentStarted):
                started.append(event)
            if isinstance(event, ApprovalRequest) and not event.decided:
                asked.append(event.tool_call_id)
                event.approve(True)
        session = agent.session_id

    assert [e.model for e in started] == ["fast", "fast", "deep", "deep"]
    assert started[0].subagent_id == started[1].subagent_id == started[2].subagent_id
    assert (fast.calls, deep.calls) == (2, 2)
    assert len(fast.requests[1]) > len(fast.requests[0]), "the resumed child went on with its conversation"
    assert len(deep.requests[1]) > 1, "the fork started from the parent's conversation"

    # a model outside the list is a result the model reads, before anyone is asked
    results = parent.tool_results(1)
    assert results["t-a"] == "fast: A"
    assert results["t-b"].startswith("The model 'gpt-9' is not one you may pick for a `general` subagent")
    assert "`fast`, `deep`" in results["t-b"]
    assert "`deep`" in results["t-c"] and "`fast`" not in results["t-c"], "a type's own list replaces the config's"
    assert "t-b" not in asked and "t-c" not in asked and "t-a" in asked

    # the task tool lists the models; the type with a list of its own says which
    task = next(t for t in parent.infos[0].function_tools if t.name == "task")
    assert "`fast`, `deep`" in (task.description or "") and "- `pinned`: Runs on deep only. (`model`: `deep`)" in (
        task.description or ""
    )
    assert "model" in task.parameters_json_schema["properties"]

    # the session index names the model each child ran on last
    assert session is not None
    saved = open_session(session, workdir)
    assert saved.agents[started[0].subagent_id].model == "function:deep"
    assert saved.agents[started[3].subagent_id].model == "function:deep"

    # a later process resumes the session: the child resumed there keeps the model the index names
    deep.add(["deep: after the restart"])
    later = Script(resume("A4"), ["done"], model_name="main")
    again = config.model_copy(update={"model": later.model})
    resumed_on: list[str] = []
    async with Agent(again, session=session) as agent, asyncio.timeout(60):
        async for event in agent.stream("PARENT again"):
            if isinstance(event, SubagentStarted):
                resumed_on.append(event.model)
            if isinstance(event, ApprovalRequest) and not event.decided:
                event.approve(True)
    assert resumed_on == ["deep"] and deep.calls == 3
    assert list(later.tool_results(1).values()) == ["deep: after the restart"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"subagent_models": ["nosuch:model-1"]}, r"subagent_models\[0\]: model 'nosuch:model-1'"),
        (
            {"agents": {"cheap": {"description": "x", "models": ["openai:gpt-4.1-mini", "llama3.2"]}}},
            r"agent type 'cheap': models\[1\]: model 'llama3.2'",
        ),
    ],
    ids=["config-list", "type-list"],
)
async def test_a_listed_model_that_cannot_resolve_is_a_config_error_at_start(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, settings: dict[str, Any], message: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    script = Script()
    config = AgentConfig(
        model=script.model,
        working_dir=workdir,
        save_sessions=False,
        disallowed_tools=["execute_ipython_cell"],
        **settings,
    )
    with pytest.raises(ConfigError, match=message):
        await Agent(config).start()
    assert script.calls == 0


async def test_a_picked_model_on_another_protocol_through_the_scripted_server(workdir: Path) -> None:
    """The parent, on chat completions, picks a listed Anthropic model for one call: that child's requests go over
    the Messages protocol under that model's name; a call without `model` stays on the parent's."""

    def respond(request: Mapping[str, Any]) -> Reply:
        messages = request["messages"]
        tools = [tool["function"]["name"] for tool in request.get("tools") or []]
        answered = any(m["role"] == "tool" for m in messages)
        if "task" not in tools:
            return Reply(text=f"child of {request.get('model')}")
        if answered:
            return Reply(text="both answered")
        return Reply(
            tool_calls=(
                ToolCall("task", {"prompt": "CHILD picked", "model": "claude-demo"}, id="t-1"),
                ToolCall("task", {"prompt": "CHILD default"}, id="t-2"),
            )
        )

    with DemoServer(responder=respond, chunk_delay=0).start() as server:
        cheap = {"model": "anthropic:claude-demo", "base_url": server.base_url_for("anthropic")}
        config = AgentConfig(
            model="openai:main-demo",
            base_url=server.base_url_for("openai"),
            working_dir=workdir,
            disallowed_tools=["execute_ipython_cell"],
            save_sessions=False,
            subagent_models=[cheap],
        )
        async with Agent(config) as agent, asyncio.timeout(60):
            events = await drive(agent.stream("PARENT"))
        by_protocol = {name: list(bodies) for name, bodies in server.requests_by_protocol.items()}

    started = {e.prompt: e.model for e in events if isinstance(e, SubagentStarted)}
    assert started == {"CHILD picked": "claude-demo", "CHILD default": "main-demo"}
    (child,) = by_protocol["anthropic"]
    assert child["model"] == "claude-demo" and "CHILD picked" in json.dumps(child["messages"])
    task = next(t["function"] for t in by_protocol["openai"][0]["tools"] if t["function"]["name"] == "task")
    assert "`anthropic:claude-demo`" in task["description"] and "model" in task["parameters"]["properties"]
    final = [e for e in events if isinstance(e, ToolOutput) and e.tool_name == "task"]
    assert {e.tool_call_id: e.content for e in final} == {"t-1": "child of claude-demo", "t-2": "child of main-demo"}
