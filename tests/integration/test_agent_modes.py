"""Where an agent type may run (`mode`), and how many subagents one agent may start (`max_children`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from freeact_sub import Agent, AgentConfig, ConfigError, SubagentStarted
from tests.scripting import Call, Router, Script, configs, drive, of

# no kernels: these agents only talk and start subagents
config = configs(auto_approve=True, kernel_pool_size=0, disallowed_tools=["execute_ipython_cell"])


async def test_max_children_refuses_a_new_child_past_the_limit_but_a_resume_is_not_new(workdir: Path) -> None:
    parent = Script(
        [Call("task", {"prompt": f"CHILD-{n}: job"}, id=f"t{n}") for n in range(3)],  # three at once, limit two
        ["two of three"],
        [Call("task", {"prompt": "CHILD-3: job"}, id="t3")], ["refused again"],
        [Call("task", {"prompt": "go on", "resume": "{resume}"}, id="again")], ["resumed"],
    )
    children = {f"CHILD-{n}:": Script([f"done {n}"], ["done again"]) for n in range(4)}
    model = Router({"PARENT": parent, **children}).model
    async with Agent(config(model, workdir, max_children=2)) as agent:
        events = await drive(agent.stream("PARENT first"))
        results = parent.tool_results(1)
        refused = [call for call, text in results.items() if "max_children=2" in text]
        assert len(of(SubagentStarted, events)) == 2 and len(refused) == 1
        assert "Do this job yourself, or `resume`" in results[refused[0]]
        await drive(agent.stream("PARENT second"))
        assert "limit of 2 subagents" in parent.tool_results(3)["t3"]
        finished = of(SubagentStarted, events)[0].subagent_id
        parent.steps[4] = [Call("task", {"prompt": "go on", "resume": finished}, id="again")]
        events = await drive(agent.stream("PARENT third"))
    assert [e.subagent_id for e in of(SubagentStarted, events)] == [finished]  # resuming is not a new child


async def test_a_primary_only_type_is_not_offered_to_task_and_a_subagent_only_type_cannot_be_the_main_agent(
    workdir: Path,
) -> None:
    types = {
        "lead": {"description": "leads the team", "mode": "primary"},
        "helper": {"description": "helps", "mode": "subagent", "max_children": 1},
    }
    parent = Script([Call("task", {"prompt": "CHILD: x", "subagent_type": "lead"}, id="bad")], ["ok"])
    model = Router({"PARENT": parent}).model
    async with Agent(config(model, workdir, agents=types, agent="lead")) as agent:
        await drive(agent.stream("PARENT go"))
        assert agent.agent_type == "lead"
    (info,) = parent.infos[:1]
    task = next(tool for tool in info.function_tools if tool.name == "task")
    assert "`helper`" in (task.description or "") and "`lead`" not in (task.description or "")
    refused = parent.tool_results(1)["bad"]
    assert "runs only as the main agent (mode: primary)" in refused and "`helper`" in refused
    with pytest.raises(ConfigError, match="mode 'subagent'"):
        async with Agent(config(model, workdir, agents=types, agent="helper")):
            pass
    with pytest.raises(ConfigError, match="mode"):
        AgentConfig.validated({"agents": {"x": {"description": "d", "mode": "sometimes"}}})
