"""`freeact-sub sessions show` tells what the live terminal showed: decisions in the words the terminal used
(by whom: the person, a standing decision, a rule, a hook), MCP calls a cell's code made, and a background
child's answer.

A real `Agent` (kernels, a real MCP server, a scripted model) behind the terminal's `Session` printing to a
recording console, its questions answered with keys; then the saved session printed by `print_transcript`.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from rich.console import Console

from freeact_sub import Agent, AgentConfig, ApprovalRequest, SubagentFinished
from freeact_sub.sessions import SavedDecision, open_session
from freeact_sub.terminal.session import Session
from freeact_sub.terminal.sessions_cmd import print_transcript
from tests.scripting import Call, Router, Script
from tests.servers import calc_server


def cell(code: str, call_id: str) -> Call:
    return Call("execute_ipython_cell", {"code": code}, id=call_id)


def hook(moment: dict) -> dict | None:
    if moment["tool_input"].get("code") == "print('hooked')":
        return {"decision": "allow"}
    if moment["tool_input"].get("code") == "print('refused')":
        return {"decision": "deny", "reason": "not this one"}
    return None


def lines(text: str) -> Counter[str]:
    """The printed lines, each once per time it was printed (times to the tenth of a second vary)."""
    text = re.sub(r"after \d+\.\d s", "after … s", text)
    return Counter(line.rstrip() for line in text.splitlines() if line.strip() and not line.startswith("you  ›"))


async def test_sessions_show_prints_what_the_live_terminal_printed(workdir: Path) -> None:
    parent = Script(
        [Call("task", {"prompt": "CHILD: job", "run_in_background": True}, id="bg"),
         cell("from mcptools.calc import add\nprint(add(a=1, b=2))", "code-call"),
         Call("calc_nosuch", {"text": "hi"}, id="unknown"),
         Call("reset_kernel", {}, id="ruled")],
        [cell("print('no')", "rejected"), cell("print('hooked')", "hooked"), cell("print('refused')", "refused")],
        [cell("print('always')", "always")],
        [cell("print('standing')", "standing")],
        ["done"],
    )
    child = Script([cell("print(7)", "child-cell")], ["the child's answer: 7"])
    config = AgentConfig(model=Router({"PARENT": parent, "CHILD:": child}).model, working_dir=workdir,
                         kernel_pool_size=0, mcp_pool_size=0, mcp_servers={"calc": calc_server()}, mcp_tools="code",
                         approvals={"reset_kernel": "deny"}, hooks={"PreToolUse": [hook]})
    keys = {"rejected": "nnot that\r", "always": "a"}
    console = Console(record=True, width=150, force_terminal=False)
    async with Agent(config) as agent:
        session = Session(agent, console, ask_keys=False)

        finished: list[SubagentFinished] = []

        def show(event: object) -> None:  # what the terminal does with each event
            session.renderer.handle(event)  # type: ignore[arg-type]
            if isinstance(event, SubagentFinished):
                finished.append(event)
            if isinstance(event, ApprovalRequest) and not event.decided:
                session.desk.submit(event)
                for key in keys.get(event.tool_call_id, "y"):
                    session.desk.press(key)

        async for event in agent.stream("PARENT go"):
            show(event)
        if not finished:  # the background child ends between turns (its session may say done before its event came)
            async for event in agent.background_events():
                show(event)
                if isinstance(event, SubagentFinished):
                    break
        session_id = agent.session_id or ""
    live = console.export_text()
    for said in ("auto-approved by hook", "refused by hook", "refused by rule", "calc_add  from code in its cell",
                 "← calc_add → 3", "rejected, the model is told: not that", "approved, and always for",
                 "result of agent-", "the child's answer: 7"):
        assert said in live  # the scenario shows each kind of decision

    replay = Console(record=True, width=150, force_terminal=False)
    saved = open_session(session_id, workdir)
    print_transcript(replay, saved, saved.main_id)
    told = replay.export_text()
    assert lines(told) == lines(live)  # every line, as often as live (lines of concurrent agents may move)
    # the answer, a model's text, sits behind its agent's bar
    assert told.split("result of agent-")[1].split("\n")[1].strip() == "│ the child's answer: 7"

    decisions = {e.tool_call_id: e.by for e in saved.events() if isinstance(e, SavedDecision)}
    assert decisions["ruled"] == "rule" and decisions["hooked"] == "hook" and decisions["always"] == "person"
    assert decisions["standing"] == "auto" and decisions["rejected"] == "person"

    # a session saved before decisions were saved still loads and prints (only whether each call ran is known)
    (saved.path / "shown.jsonl").unlink()
    old = Console(record=True, width=150, force_terminal=False)
    print_transcript(old, open_session(session_id, workdir), saved.main_id)
    assert "reset_kernel  rejected" in old.export_text()
