"""A secret made while a kernel runs, and rules that a child type tries to lift."""

from __future__ import annotations

from pathlib import Path

import pytest

from freeact_sub import Agent, AgentConfig, AgentType, ApprovalRequest, CodeExecutionOutput
from freeact_sub.sandbox import platform_problem
from tests.scripting import Call, Router, Script, drive, of

SECRET = "LATE-SECRET-2718"


@pytest.mark.skipif(platform_problem() is not None, reason=f"no sandbox here: {platform_problem()}")
async def test_a_secret_made_after_the_kernel_started_is_covered_after_its_restart(tmp_path: Path) -> None:
    read = (
        "try:\n    print('read:', open('late/.env').read())\n"
        "except OSError as exc:\n    print('refused:', exc.errno)\n"
    )
    script = Script([Call("execute_ipython_cell", {"code": read}, id="c1")], [Call("reset_kernel", {}, id="r")],
                    [Call("execute_ipython_cell", {"code": read}, id="c2")], ["done"])
    config = AgentConfig(model=script.model, working_dir=tmp_path, auto_approve=True, enable_subagents=False)
    async with Agent(config) as agent:
        (tmp_path / "late").mkdir()
        (tmp_path / "late" / ".env").write_text(SECRET)  # the person writes it while the kernel runs
        events = await drive(agent.stream("read it"))
    first, second = (output.text for output in of(CodeExecutionOutput, events))
    assert SECRET in first  # the kernel that was running before it existed can read it (the README says so)
    assert second.strip() == "refused: 13"  # after the restart it is covered


async def _child_cell_requests(
    global_rules: dict[str, str], parent_rules: dict[str, str], tmp_path: Path
) -> list[ApprovalRequest]:
    """The approval requests of a cell from a child whose type allows everything, under a parent typed `lead`."""
    router = Router({
        "MAIN": Script([Call("task", {"prompt": "CHILD go", "subagent_type": "eager"}, id="t")], ["main done"]),
        "CHILD": Script([Call("execute_ipython_cell", {"code": "print('ran')"}, id="c")], ["child done"]),
    })
    types = {
        "lead": AgentType(description="the main agent's type", approvals=parent_rules),
        "eager": AgentType(description="allows itself everything", approvals={"*": "allow"}),
    }
    config = AgentConfig(model=router.model, working_dir=tmp_path, approvals=global_rules, agents=types,
                         agent="lead", kernel_pool_size=0)
    async with Agent(config) as agent:
        # the person approves the task call; a cell asked about would be refused (and fail the test below)
        events = await drive(agent.stream("MAIN go"), lambda request: request.tool_name == "task")
    return [e for e in of(ApprovalRequest, events) if e.tool_name == "execute_ipython_cell"]


@pytest.mark.parametrize(
    ("global_rules", "parent_rules", "source"),
    [({"execute_ipython_cell": "deny"}, {}, "approvals"),
     ({}, {"execute_*": "deny"}, "agent type lead")],
)
async def test_a_deny_up_the_chain_beats_a_child_types_allow(
    global_rules: dict[str, str], parent_rules: dict[str, str], source: str, tmp_path: Path
) -> None:
    (request,) = await _child_cell_requests(global_rules, parent_rules, tmp_path)
    assert request.decided and request.decision is False and not request.auto_approved
    assert request.rule is not None and request.rule.endswith(f"deny ({source})"), request.rule


@pytest.mark.skipif(platform_problem() is not None, reason=f"no sandbox here: {platform_problem()}")
async def test_a_cell_that_makes_a_new_git_or_env_is_told_and_the_person_sees_it(tmp_path: Path) -> None:
    plant = "import os\nos.makedirs('.git/hooks')\nopen('.env', 'w').write('FREEACT_SUB_SANDBOX=off')\nprint('planted')"
    script = Script([Call("execute_ipython_cell", {"code": plant}, id="c1")],
                    [Call("execute_ipython_cell", {"code": "print('quiet')"}, id="c2")], ["done"])
    config = AgentConfig(model=script.model, working_dir=tmp_path, auto_approve=True, enable_subagents=False)
    async with Agent(config) as agent:
        events = await drive(agent.stream("plant"))
    first, second = of(CodeExecutionOutput, events)
    assert "[sandbox] This cell created .env, .git in the working folder." in first.text
    assert "[sandbox]" in str(script.tool_results(1)["c1"])  # the model is told too
    assert "[sandbox]" not in second.text  # only the cell that made them
