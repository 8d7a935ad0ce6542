"""The terminal with nested subagents (`max_depth=2`): a grandchild's lines and its row in the live table sit
under its parent's, indented.

A real `Agent` (kernels, scripted model) behind the terminal's `Session`, printing to a recording console.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

from freeact_sub import Agent, AgentConfig, SubagentStarted
from freeact_sub.terminal.session import Session
from freeact_sub.terminal.status import agents_table
from tests.scripting import Call, Router, Script


def _text(renderable: object) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


async def test_grandchildren_are_indented_under_their_parent_in_the_transcript_and_the_live_table(
    workdir: Path,
) -> None:
    parent = Script([Call("task", {"prompt": "CHILD-mid: job"}, id="mid"),
                     Call("task", {"prompt": "CHILD-other: job"}, id="other")], ["parent done"])
    mid = Script([Call("task", {"prompt": "CHILD-leaf: job"}, id="leaf")], ["mid done"])
    leaf = Script([Call("execute_ipython_cell", {"code": "print('from the leaf')"}, id="leaf-cell")], ["leaf done"])
    other = Script(["other done"])
    model = Router({"PARENT": parent, "CHILD-mid:": mid, "CHILD-leaf:": leaf, "CHILD-other:": other}).model
    config = AgentConfig(model=model, working_dir=workdir, kernel_pool_size=0, mcp_pool_size=0, auto_approve=True,
                         max_depth=2)
    console = Console(record=True, width=160, force_terminal=False)
    async with Agent(config) as agent:
        session = Session(agent, console, ask_keys=False)
        started: dict[str, str] = {}
        table_while_nested = ""
        async for event in agent.stream("PARENT go"):
            session.renderer.handle(event)
            if isinstance(event, SubagentStarted):
                started[event.prompt] = event.subagent_id
            if event.agent_id == started.get("CHILD-leaf: job") and not table_while_nested:
                table_while_nested = _text(agents_table(agent.subagents(), session.palette))
        board = _text(session.board.render())
    main, mid_id, leaf_id, other_id = (agent.agent_id, started["CHILD-mid: job"], started["CHILD-leaf: job"],
                                       started["CHILD-other: job"])
    text = console.export_text()
    # the transcript: the main agent's and its subagents' lines start at the margin, the grandchild's two spaces in
    assert re.search(rf"^{main} +\+ started {mid_id}", text, re.M)
    assert re.search(rf"^{mid_id} +\+ started {leaf_id}", text, re.M)
    assert re.search(rf"^  {leaf_id} +│ from the leaf$", text, re.M)
    assert re.search(rf"^  {leaf_id} +› leaf done", text, re.M)
    assert re.search(rf"^{mid_id} +■ {leaf_id} done", text, re.M)
    assert not re.search(rf"^{leaf_id}", text, re.M)
    # the live table: each subagent right below its parent, the grandchild marked as nested
    rows = [line.split()[0:2] for line in board.splitlines()[1:-1]]
    assert rows == [[mid_id, "general"], ["└", leaf_id], [other_id, "general"]]
    # /agents while the grandchild runs: indented under its parent, whose id is in the parent column
    listed = {line.split()[0]: line for line in table_while_nested.splitlines()[1:]}
    assert re.match(rf"^  {leaf_id} +{mid_id} ", listed[leaf_id]) and listed[mid_id].startswith(f"{mid_id} ")
