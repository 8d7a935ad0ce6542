"""The built-in `explore`, `plan` and `review` types, driven through the scripted server.

One main agent starts one child of each built-in type in a single response. Each child runs a
cell that reads a file and tries to write one, then answers with what the cell printed. The
server's request log shows what each agent was sent: its tools, its system prompt, its job.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from freeact_sub import Agent, AgentConfig, ApprovalRequest, CodeExecutionOutput, SubagentStarted
from freeact_sub.config.agent_types import BUILTIN_TYPES, confine
from freeact_sub.demo import DemoServer
from freeact_sub.demo.scenario import Reply, ToolCall
from freeact_sub.sandbox import BUILT_IN_PROFILES, platform_problem
from tests.processes import kernel_processes
from tests.scripting import Call, Router, Script, drive

JOBS = {
    "explore": "EXPLORE-JOB: where is SECRET_NUMBER defined? thoroughness: quick",
    "plan": "PLAN-JOB: plan a change of SECRET_NUMBER",
    "review": "REVIEW-JOB: review notes.txt",
}

CELL = """\
print(open("notes.txt").read().strip())
try:
    open("written.txt", "w").write("x")
    print("WRITE-WORKED")
except OSError as exc:
    print("WRITE-REFUSED", type(exc).__name__)
"""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, Mapping))


def respond(request: Mapping[str, Any]) -> Reply:
    """The main agent starts one child of each built-in type; a child runs `CELL`, then quotes its output."""
    messages = request["messages"]
    tools = [tool["function"]["name"] for tool in request.get("tools") or []]
    after_prompt = messages[max(i for i, m in enumerate(messages) if m["role"] == "user") + 1 :]
    results = [_text(m.get("content")) for m in after_prompt if m["role"] == "tool"]
    if "task" in tools:
        if not results:
            calls = tuple(
                ToolCall("task", {"prompt": job, "subagent_type": kind}, id=f"t-{kind}") for kind, job in JOBS.items()
            )
            return Reply(text="Starting three helpers.", tool_calls=calls)
        return Reply(text="All three reported.")
    if not results:
        return Reply(tool_calls=(ToolCall("execute_ipython_cell", {"code": CELL}),))
    return Reply(text="CHILD SAW: " + " ".join(results[-1].split()))


def system_prompt(body: Mapping[str, Any]) -> str:
    return "".join(_text(m.get("content")) for m in body["messages"] if m["role"] == "system")


def job_of(body: Mapping[str, Any]) -> str:
    return next(_text(m.get("content")) for m in body["messages"] if m["role"] == "user")


async def test_explore_plan_and_review_through_the_scripted_server(workdir: Path) -> None:
    (workdir / "notes.txt").write_text("SECRET_NUMBER = 42\n", encoding="utf-8")
    enforced = platform_problem() is None
    asked: list[ApprovalRequest] = []
    events: list[Any] = []
    with DemoServer(responder=respond, chunk_delay=0).start() as server:
        config = AgentConfig(
            model="openai:scripted",
            base_url=server.base_url_for("openai"),
            working_dir=workdir,
            kernel_pool_size=0,
            save_sessions=False,
            sandbox="workspace" if enforced else "off",
        )
        async with Agent(config) as agent, asyncio.timeout(120):
            async for event in agent.stream("MAIN: look around"):
                events.append(event)
                if isinstance(event, ApprovalRequest) and not event.decided:
                    asked.append(event)
                    event.approve(True)
        bodies = list(server.requests)

    started = {e.agent_type: e for e in events if isinstance(e, SubagentStarted)}
    assert set(started) == set(JOBS)
    assert {kind: e.max_turns for kind, e in started.items()} == {"explore": 20, "plan": 15, "review": 15}
    ids = {e.subagent_id: kind for kind, e in started.items()}

    # the main agent's task tool offers the three, each with a description that says when to pick it
    main = bodies[0]
    task = next(t["function"] for t in main["tools"] if t["function"]["name"] == "task")
    for kind in JOBS:
        assert f"- `{kind}`: " in task["description"]
    assert "thoroughness: quick" in task["description"]

    # each child was sent only its kernel tools, its role after the code-action prompt, and its job
    for kind, job in JOBS.items():
        sent = [b for b in bodies if job_of(b) == job]
        assert sent, kind
        assert sorted(t["function"]["name"] for t in sent[0]["tools"]) == ["execute_ipython_cell", "reset_kernel"]
        prompt = system_prompt(sent[0])
        assert prompt.count("## Your role") == 1 and "execute_ipython_cell" in prompt
        assert BUILTIN_TYPES[kind].prompt.splitlines()[0] in prompt, kind
        assert "read-only sandbox" in prompt

    # approvals: explore's cell is decided by its type's one rule; plan's and review's are asked
    cells = [e for e in events if isinstance(e, ApprovalRequest) and e.tool_name == "execute_ipython_cell"]
    by_kind = {ids[e.agent_id]: e for e in cells}
    assert set(by_kind) == set(JOBS)
    if enforced:
        assert by_kind["explore"].auto_approved
        assert by_kind["explore"].rule == "'execute_ipython_cell': allow (agent type explore)"
    else:  # the rule relies on the sandbox: without one, the cell is asked
        assert not by_kind["explore"].auto_approved
    assert {ids[r.agent_id] for r in asked if r.agent_id in ids} == ({"plan", "review"} if enforced else set(JOBS))

    # the sandbox: each child read the file and could not write one
    outputs = {ids[e.agent_id]: e.text for e in events if isinstance(e, CodeExecutionOutput) and e.agent_id in ids}
    for kind in JOBS:
        assert "SECRET_NUMBER = 42" in outputs[kind]
        assert started[kind].sandbox == ("read-only" if enforced else "off")
        if enforced:
            assert "WRITE-REFUSED PermissionError" in outputs[kind], outputs[kind]
    if enforced:
        assert not (workdir / "written.txt").exists()


def test_a_built_in_type_falls_back_where_its_sandbox_cannot_be_enforced(tmp_path: Path) -> None:
    """On a gateway (or a platform without a sandbox) `explore` runs under its parent's profile and asks."""
    gateway = AgentConfig(working_dir=tmp_path, kernel_gateway="http://127.0.0.1:9")
    off = BUILT_IN_PROFILES["off"]
    profile, definition = confine(off, BUILTIN_TYPES["explore"], "explore", gateway)
    assert profile is off and definition.approvals == {} and definition.prompt == BUILTIN_TYPES["explore"].prompt
    own = BUILTIN_TYPES["explore"].model_copy()  # the same fields, but a type of the user's: its sandbox is required
    with pytest.raises(Exception, match="cannot be enforced"):
        confine(off, own, "explore", gateway)


def test_the_task_schema_offers_model() -> None:
    schema = json.loads((Path(__file__).parents[2] / "tools" / "task.json").read_text(encoding="utf-8"))
    assert schema["parameters"]["properties"]["model"]["type"] == "string"


@pytest.mark.skipif(platform_problem() is not None, reason="needs an enforceable sandbox")
async def test_a_second_read_only_child_takes_a_kernel_pooled_for_its_profile(workdir: Path) -> None:
    """The first `explore` child makes a pool for the read-only profile; the next one finds its kernel there."""
    holder: list[Agent] = []
    child_kernels: list[int | None] = []

    def child(_: list[Any]) -> list[str]:  # runs while the child is alive: note its kernel's process
        (record,) = [r for r in holder[0].tree.agents.values() if r.parent_id is not None]
        kernel = cast(Agent, record.agent).kernel
        child_kernels.append(kernel.pid if kernel is not None else None)
        return ["done"]

    parent = Script(
        [Call("task", {"prompt": "CHILD 1", "subagent_type": "explore"})],
        ["ok"],
        [Call("task", {"prompt": "CHILD 2", "subagent_type": "explore"})],
        ["ok"],
    )
    model = Router({"PARENT": parent, "CHILD": Script(child, child)}).model
    config = AgentConfig(model=model, working_dir=workdir, kernel_pool_size=1, save_sessions=False)
    async with Agent(config) as agent, asyncio.timeout(60):
        holder.append(agent)
        await drive(agent.stream("PARENT 1"))
        pool = agent.tree.supplies.profile_pools[BUILT_IN_PROFILES["read-only"]]
        while pool.ready < 1:  # noqa: ASYNC110 - waiting for the background refill
            await asyncio.sleep(0.02)
        ready_before = set(kernel_processes())
        await drive(agent.stream("PARENT 2"))
    first, second = child_kernels
    assert first not in ready_before and second in ready_before, "the second child's kernel was ready before its call"
