"""A subagent that waits for a slot is shown as queued, and its wait is told apart from its run time."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from freeact_sub import Agent, AgentConfig, ApprovalPolicy, SubagentFinished, SubagentQueued, SubagentStarted
from freeact_sub.notebook.run_panel import RunPanel
from freeact_sub.terminal.palette import Palette
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.status import SubagentBoard
from tests.scripting import Call, Router, Script, drive, of


async def test_the_second_child_under_a_bound_of_one_is_queued_then_started_and_its_wait_is_apart(
    workdir: Path,
) -> None:
    cell = Call("execute_ipython_cell", {"code": "import time; time.sleep(0.6)"})
    parent = Script([Call("task", {"prompt": "CHILD-1: a"}, id="t1"), Call("task", {"prompt": "CHILD-2: b"}, id="t2")],
                    ["both done"])
    children = {f"CHILD-{n}:": Script([cell], [f"done {n}"]) for n in (1, 2)}
    model = Router({"PARENT": parent, **children}).model
    config = AgentConfig(model=model, working_dir=workdir, auto_approve=True, max_subagents=1, kernel_pool_size=0)
    async with Agent(config) as agent:
        events = await drive(agent.stream("PARENT go"))
    (queued,) = of(SubagentQueued, events)
    started = {e.subagent_id: e for e in of(SubagentStarted, events)}
    finished = {e.subagent_id: e for e in of(SubagentFinished, events)}
    assert queued.subagent_id in started and events.index(queued) < events.index(started[queued.subagent_id])
    first = next(agent_id for agent_id in finished if agent_id != queued.subagent_id)
    assert finished[first].waited == 0.0
    waited = finished[queued.subagent_id]
    assert waited.waited >= 0.5  # the first child's 0.6 s cell
    assert waited.elapsed < waited.waited + 5 and waited.elapsed >= 0.5  # its own run, not counting the wait

    # the terminal: queued, then started; the end line says the wait apart
    output = io.StringIO()
    palette = Palette()
    board = SubagentBoard(palette)
    renderer = Renderer(Console(file=output, width=160), palette, board, main_id=agent.agent_id)
    renderer.handle(queued)
    table = Console(file=io.StringIO(), width=160, record=True)
    table.print(board.render())
    assert "waiting for a slot" in table.export_text()
    for event in events:
        if isinstance(event, SubagentStarted | SubagentFinished):
            renderer.handle(event)
    text = output.getvalue()
    assert f"queued {queued.subagent_id}" in text and "waiting for a slot)" in text
    assert "s waiting for a slot)" in text.split(f"{queued.subagent_id} done")[-1].splitlines()[0]

    # the notebook: the queued child's panel exists before it starts, then runs and ends with its wait shown
    panel = RunPanel(agent.agent_id, "PARENT go", policy=ApprovalPolicy(), on_stop=lambda: None)
    panel.handle(queued)
    assert panel.panels[queued.subagent_id].state == "waiting for a slot"
    panel.handle(started[queued.subagent_id])
    assert panel.panels[queued.subagent_id].state == "running"
    panel.handle(waited)
    header = panel.panels[queued.subagent_id]._header.value
    assert "waiting for a slot)" in header and 'data-state="done"' in header
