"""Hooks, as callables and as shell commands, at every moment; each failure mode leaves the step as without them.

Real kernels, the real calc MCP server and scripted models; the command hooks are real shell
commands running small Python programs.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from freeact_sub import (
    Agent,
    AgentConfig,
    ApprovalRequest,
    CodeExecutionOutput,
    ConfigError,
    HookFailed,
    HookSpec,
)
from tests.scripting import Call, Router, Script, configs, drive, of
from tests.servers import calc_server


def cell(code: str, call_id: str = "cell") -> Call:
    return Call("execute_ipython_cell", {"code": code}, id=call_id)


def command(program: str) -> str:
    """A shell command running `program` with this Python (it reads the moment on stdin)."""
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(program)}"


config = configs(enable_subagents=False, kernel_pool_size=0)


async def test_a_pre_tool_use_hook_denies_with_a_reason_the_model_reads_and_the_turn_goes_on(workdir: Path) -> None:
    seen: list[dict[str, Any]] = []

    def no_deletes(moment: dict[str, Any]) -> dict[str, Any] | None:
        seen.append(moment)
        if "remove" in moment["tool_input"].get("code", ""):
            return {"decision": "deny", "reason": "deleting files is not allowed here"}
        return None

    (workdir / "keep.txt").write_text("x")
    script = Script([cell("import os; os.remove('keep.txt')", "rm")], [cell("print('fine')", "ok")], ["done"])
    async with Agent(config(script.model, workdir, hooks={"PreToolUse": [no_deletes]})) as agent:
        events = await drive(agent.stream("tidy up"))  # the person approves whatever is asked
    assert (workdir / "keep.txt").exists()
    refused = script.tool_results(1)["rm"]
    assert "A hook (" in refused and "no_deletes" in refused and "deleting files is not allowed here" in refused
    assert "fine" in script.tool_results(2)["ok"]
    requests = {r.tool_call_id: r for r in of(ApprovalRequest, events)}
    assert requests["rm"].decision is False and requests["rm"].hook is not None and "no_deletes" in requests["rm"].hook
    assert requests["ok"].hook is None  # no opinion: asked as usual
    assert seen[0]["hook_event_name"] == "PreToolUse" and seen[0]["tool_name"] == "execute_ipython_cell"
    assert seen[0]["agent_id"] == agent.agent_id and seen[0]["parent_id"] is None
    assert seen[0]["agent_type"] == seen[0]["subagent_type"] == "general" and seen[0]["session_id"] == agent.session_id
    assert seen[0]["tool_use_id"] == "rm" and seen[0]["cwd"] == str(workdir)


async def test_allow_runs_without_asking_ask_asks_and_a_deny_rule_still_wins(workdir: Path) -> None:
    def decide(moment: dict[str, Any]) -> dict[str, Any]:
        code = moment["tool_input"].get("code", "")
        return {"decision": "allow" if "safe" in code else "ask"}

    script = Script([cell("print('safe')", "a"), cell("print('other')", "b"), Call("reset_kernel", {}, id="r")],
                    ["done"])
    cfg = config(script.model, workdir, hooks={"PreToolUse": [decide]}, approvals={"reset_kernel": "deny"})
    asked: list[str] = []

    def person(request: ApprovalRequest) -> bool:
        asked.append(request.tool_call_id)
        return True

    async with Agent(cfg) as agent:
        events = await drive(agent.stream("go"), decide=person)
    requests = {r.tool_call_id: r for r in of(ApprovalRequest, events)}
    assert requests["a"].auto_approved and requests["a"].hook is not None and requests["a"].rule is None
    assert asked == ["b"]  # `ask` went to the person
    assert requests["r"].decision is False and requests["r"].rule is not None  # the deny rule
    assert "An approval rule refused" in script.tool_results(1)["r"]


async def test_a_hook_rewrites_the_arguments_before_anyone_is_asked(workdir: Path) -> None:
    def add_a_timeout(moment: dict[str, Any]) -> dict[str, Any]:
        return {"tool_input": {"code": "print('rewritten:', " + repr(moment["tool_input"]["code"]) + ")"}}

    script = Script([cell("print('original')")], ["done"])
    async with Agent(config(script.model, workdir, hooks={"PreToolUse": [add_a_timeout]})) as agent:
        events = await drive(agent.stream("go"))
    (request,) = of(ApprovalRequest, events)
    assert request.tool_args["code"].startswith("print('rewritten:'") and request.hook is not None
    (output,) = of(CodeExecutionOutput, events)
    assert "rewritten: print('original')" in output.content


async def test_a_rewrite_that_does_not_fit_the_tool_is_dropped_and_reported(workdir: Path) -> None:
    script = Script([cell("print('original')")], ["done"])
    hooks = {"PreToolUse": [lambda moment: {"tool_input": {"source": "print(1)"}}]}
    async with Agent(config(script.model, workdir, hooks=hooks)) as agent:
        events = await drive(agent.stream("go"))
    (error,) = of(HookFailed, events)
    assert "does not fit" in error.message and error.tool_call_id == "cell"
    assert "original" in of(CodeExecutionOutput, events)[0].content


async def test_post_tool_use_adds_a_note_to_what_the_model_gets(workdir: Path) -> None:
    async def remind(moment: dict[str, Any]) -> dict[str, Any]:
        assert moment["tool_response"].strip() == "42"
        return {"note": "remember to cite the source"}

    script = Script([cell("print(42)")], ["done"])
    hooks = {"PostToolUse": [HookSpec(hook=remind, matcher="execute_*")]}
    async with Agent(config(script.model, workdir, hooks=hooks, auto_approve=True)) as agent:
        await drive(agent.stream("go"))
    result = script.tool_results(1)["cell"]
    assert result.startswith("42") and "remember to cite the source" in result


@pytest.mark.parametrize(
    ("program", "timeout", "expected"),
    [
        # a Python's start can take more than half a second on a loaded machine: only the hook that sleeps times out
        ("raise SystemExit(3)", 60, "exited with 3"),
        ("print('not json')", 60, "not JSON"),
        ("import time; time.sleep(5)", 0.5, "timeout of 0.5 s"),
        ("print(json.dumps({'decision': 'maybe'}))", 60, "is not one of"),
    ],
)
async def test_a_failing_command_hook_is_reported_and_the_call_is_asked_as_if_it_did_not_exist(
    workdir: Path, program: str, timeout: float, expected: str
) -> None:
    hooks = {"PreToolUse": [{"command": command("import json, sys\n" + program), "timeout": timeout}]}
    script = Script([cell("print('ran')")], ["done"])
    async with Agent(config(script.model, workdir, hooks=hooks)) as agent:
        events = await drive(agent.stream("go"))
    (error,) = of(HookFailed, events)
    assert expected in error.message and error.hook_event_name == "PreToolUse"
    (request,) = of(ApprovalRequest, events)
    assert not request.auto_approved and request.hook is None  # the person was asked
    assert "ran" in of(CodeExecutionOutput, events)[0].content


async def test_a_raising_callable_is_reported_not_fatal(workdir: Path) -> None:
    def broken(moment: dict[str, Any]) -> None:
        raise RuntimeError("bug in my hook")

    script = Script([cell("print('ran')")], ["done"])
    async with Agent(config(script.model, workdir, hooks={"PreToolUse": [broken]})) as agent:
        events = await drive(agent.stream("go"))
    (error,) = of(HookFailed, events)
    assert "RuntimeError: bug in my hook" in error.message


async def test_a_command_hook_reads_the_moment_on_stdin_and_answers_on_stdout(workdir: Path, tmp_path: Path) -> None:
    """Claude Code's settings shape, from a config file."""
    record = tmp_path / "moments.jsonl"
    program = (
        "import json, sys\n"
        "moment = json.load(sys.stdin)\n"
        f"open({str(record)!r}, 'a').write(json.dumps(moment) + '\\n')\n"
        "if moment['tool_name'] == 'calc_add':\n"
        "    print(json.dumps({'decision': 'deny', 'reason': 'no adding today'}))\n"
    )
    settings = tmp_path / "freeact.json"
    settings.write_text(json.dumps({
        "enable_subagents": False,
        "mcp_servers": {"calc": calc_server()},
        "hooks": {"PreToolUse": [{"matcher": "calc_*", "hooks": [{"type": "command", "command": command(program)}]}]},
    }))
    script = Script([Call("calc_add", {"a": 1, "b": 2}, id="add"), cell("print(1)")], ["done"])
    cfg = AgentConfig.load(settings, model=script.model, working_dir=workdir, kernel_pool_size=0)
    async with Agent(cfg) as agent:
        await drive(agent.stream("go"))
    moments = [json.loads(line) for line in record.read_text().splitlines()]
    assert [m["tool_name"] for m in moments] == ["calc_add"]  # the matcher kept the cell away from it
    assert moments[0]["tool_input"] == {"a": 1, "b": 2} and moments[0]["hook_event_name"] == "PreToolUse"
    assert "no adding today" in script.tool_results(1)["add"]


async def test_hooks_apply_to_mcp_calls_made_from_a_cells_code(workdir: Path) -> None:
    def deny_echo(moment: dict[str, Any]) -> dict[str, Any] | None:
        return {"decision": "deny", "reason": "no echo"} if moment["tool_name"] == "calc_echo" else None

    code = "from mcptools.calc import echo\ntry:\n    echo(text='hi')\nexcept Exception as e:\n    print('refused:', e)"
    script = Script([cell(code)], ["done"])
    cfg = config(script.model, workdir, hooks={"PreToolUse": [deny_echo]}, auto_approve=True, mcp_tools="code",
                 mcp_servers={"calc": calc_server()})
    async with Agent(cfg) as agent:
        events = await drive(agent.stream("go"))
    (output,) = of(CodeExecutionOutput, events)
    assert "refused:" in output.content and "no echo" in output.content


async def test_prompt_subagent_and_stop_moments_are_told_in_order_and_scoped_by_agent_type(workdir: Path) -> None:
    moments: list[tuple[str, dict[str, Any]]] = []

    def told(name: str) -> Any:
        def hook(moment: dict[str, Any]) -> dict[str, Any] | None:
            moments.append((name, moment))
            return {"note": "the user prefers short answers"} if name == "prompt" else None
        return hook

    parent = Script([Call("task", {"prompt": "CHILD: count", "subagent_type": "counter"}, id="t")], ["all done"])
    child = Script(["three"])
    model = Router({"PARENT": parent, "CHILD:": child}).model
    hooks = {
        "UserPromptSubmit": [told("prompt")],
        "SubagentStart": [told("start")],
        "SubagentStop": [told("stop")],
        "Stop": [told("final")],
        "PreToolUse": [HookSpec(hook=told("counter-only"), agents=["counter"])],
    }
    cfg = AgentConfig(model=model, working_dir=workdir, auto_approve=True, kernel_pool_size=0, hooks=hooks,
                      agents={"counter": {"description": "counts"}})
    async with Agent(cfg) as agent:
        await drive(agent.stream("PARENT go"))
    names = [name for name, _ in moments]
    assert names == ["prompt", "start", "final", "stop", "final"]  # the child's Stop, then its end, then the main's
    start, stop = moments[1][1], moments[3][1]
    assert start["agent_type"] == "counter" and start["parent_id"] == agent.agent_id
    assert start["prompt"] == "CHILD: count" and start["subagent_id"] == start["agent_id"]
    assert stop["status"] == "done" and stop["turns_used"] == 1 and "usage" in stop
    assert moments[4][1]["final_answer"] == "all done" and moments[2][1]["final_answer"] == "three"
    # the prompt's note went to the model with the prompt
    assert "the user prefers short answers" in json.dumps([str(p) for p in parent.requests[0][0].parts])


def test_a_bad_hook_table_names_the_problem() -> None:
    with pytest.raises(ValueError, match="unknown hook event 'BeforeTool'"):
        AgentConfig(hooks={"BeforeTool": [print]})
    with pytest.raises(ValueError, match="either `hook`"):
        AgentConfig(hooks={"PreToolUse": [{"matcher": "x"}]})
    with pytest.raises(ConfigError, match="hooks"):
        AgentConfig.validated({"hooks": {"PreToolUse": [{"command": "true", "timeout": -1}]}}, source="test")
