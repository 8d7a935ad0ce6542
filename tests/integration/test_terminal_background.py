"""The terminal session between turns: a background subagent's question is shown and answered at the prompt;
`/agents` lists live subagents with tokens and cost, `/stop ID` stops one.

A real `Agent` (kernels, scripted model) behind the terminal's `Session`, printing to a recording console.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.console import Console

from freeact_sub import Agent, AgentConfig, ApprovalRequest, Response
from freeact_sub.terminal.session import Session
from tests.scripting import Block, Call, Router, Script, drive, until

LIMIT = 120.0


async def test_background_question_between_turns_and_agent_commands(workdir: Path) -> None:
    release, release_slow = asyncio.Event(), asyncio.Event()
    parent = Script(
        [Call("task", {"prompt": "CHILD-ask: job", "run_in_background": True}, id="t1"),
         Call("task", {"prompt": "CHILD-slow: job", "run_in_background": True}, id="t2")],
        ["Both run in the background."],
    )
    ask = Script([Block(release), Call("execute_ipython_cell", {"code": "print('asked')"}, id="ask-cell")], ["asked"])
    sleep = Call("execute_ipython_cell", {"code": "import time; time.sleep(60)"}, id="slow-cell")
    slow = Script([Block(release_slow), sleep], ["never"])
    model = Router({"PARENT": parent, "CHILD-ask:": ask, "CHILD-slow:": slow}).model
    config = AgentConfig(model=model, working_dir=workdir, kernel_pool_size=0, mcp_pool_size=0)
    console = Console(record=True, width=160, force_terminal=False)
    async with Agent(config) as agent:
        session = Session(agent, console, ask_keys=False)
        await drive(agent.stream("PARENT go"))  # the turn (its own questions answered); the children wait
        watcher = asyncio.create_task(session._watch_background())
        try:
            ids = {info.prompt: info.agent_id for info in agent.subagents()}
            ask_id, slow_id = ids["CHILD-ask: job"], ids["CHILD-slow: job"]
            # the slow child's question arrives between turns: shown, and answered with /y at the prompt
            release_slow.set()
            await until(lambda: session.desk.waiting == 1, "the slow child's question should wait on the desk", LIMIT)
            assert session.desk.selected is not None and session.desk.selected.agent_id == slow_id
            assert session.command("/y")
            assert session.command("/agents")
            assert session.command("/stop " + slow_id)
            release.set()
            await until(lambda: session.desk.waiting == 1, "the other child's question should wait on the desk", LIMIT)
            assert session.command("/n not now")
            await until(lambda: console.export_text(clear=False).count("■") == 2, "both children should end", LIMIT)
            assert not session.command("an ordinary prompt")
        finally:
            watcher.cancel()
    text = console.export_text()
    assert f"{slow_id} waits for your answer" in text and f"{ask_id} waits for your answer" in text
    assert "subagent" in text and "tokens" in text and "(background)" in text  # the /agents table
    assert f"Stopping {slow_id}" in text
    assert f"{slow_id} cancelled" in text
    assert "rejected, the model is told: not now" in text  # /n with a reason: the child reads it and goes on


async def test_s_on_a_childs_question_stops_that_child_and_the_parents_turn_goes_on(workdir: Path) -> None:
    parent = Script(
        [Call("task", {"prompt": "CHILD-ask: job"}, id="t1"), Call("task", {"prompt": "CHILD-ok: job"}, id="t2")],
        ["One was stopped, one answered."],
    )
    ask = Script([Call("execute_ipython_cell", {"code": "print('asked')"}, id="ask-cell")], ["never"])
    ok = Script(["fine"])
    model = Router({"PARENT": parent, "CHILD-ask:": ask, "CHILD-ok:": ok}).model
    config = AgentConfig(model=model, working_dir=workdir, kernel_pool_size=0, mcp_pool_size=0)
    console = Console(record=True, width=160, force_terminal=False)
    async with Agent(config) as agent:
        session = Session(agent, console, ask_keys=False)
        answer = ""
        async for event in agent.stream("PARENT go"):
            session.renderer.handle(event)
            if isinstance(event, ApprovalRequest) and not event.decided:
                if event.tool_name == "execute_ipython_cell":
                    session.desk.submit(event)  # the child's question, as the terminal shows it
                    assert session.desk.selected is event
                    assert session.desk.press("s")  # the key on the pending question
                    assert session.desk.waiting == 0
                else:
                    event.approve(True)
            elif isinstance(event, Response) and event.final and event.agent_id == agent.agent_id:
                answer = event.content
    assert answer == "One was stopped, one answered."  # the parent's turn went on
    results = parent.tool_results(1)
    assert results["t1"].startswith("[The user stopped the subagent")
    assert results["t2"] == "fine"  # the sibling finished untouched
    assert "stopping this subagent" in console.export_text()
