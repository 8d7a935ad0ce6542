"""Resume in the notebook: `AgentView` on a resumed agent shows the earlier turns collapsed, children included,
and a finished child's panel opens from its saved transcript."""

from __future__ import annotations

from pathlib import Path

import ipywidgets as widgets
import pytest
from pydantic_ai.messages import UserPromptPart

from freeact_sub import Agent, AgentConfig
from freeact_sub.notebook import AgentView
from freeact_sub.notebook.run_panel import RunPanel
from freeact_sub.sessions import RESUME_NOTE
from tests.scripting import Call, Router, Script

pytestmark = pytest.mark.timeout(180)


def panel_text(widget: widgets.Widget) -> str:
    """All HTML values under a widget."""
    found = []
    if isinstance(widget, widgets.HTML):
        found.append(widget.value)
    for child in getattr(widget, "children", ()):
        found.append(panel_text(child))
    return "\n".join(found)


async def test_resumed_agent_view_shows_earlier_turns_and_a_childs_saved_panel(workdir: Path) -> None:
    main = Script(
        [Call("execute_ipython_cell", {"code": "print('main says', 6 * 7)"})],
        [Call("task", {"prompt": "CHILD: count"}, id="task-1")],
        ["Both done."],
    )
    child = Script([Call("execute_ipython_cell", {"code": "print('child counted', 3)"})], ["Three."])
    router = Router({"MAIN": main, "CHILD:": child})
    config = AgentConfig(model=router.model, working_dir=workdir, auto_approve=True, kernel_pool_size=0)
    async with Agent(config) as agent:
        view = AgentView(agent, auto_approve=True)
        assert view.earlier_turns() is None  # nothing saved yet
        await view.run("MAIN: first job")
        assert view.answer == "Both done."
        session_id = agent.session_id
        [child_panel] = [p for p in view.panel.panels.values() if p.subagent]  # type: ignore[union-attr]
        child_id = child_panel.agent_id

    main.add(["Resumed fine."])
    resumed = Agent(config, session=session_id)
    async with resumed:
        view = AgentView(resumed, auto_approve=True)
        earlier = view.earlier_turns()
        assert isinstance(earlier, widgets.Accordion) and earlier.selected_index is None  # collapsed
        [run] = earlier.children[0].children
        assert isinstance(run, RunPanel) and run.main.agent_id == resumed.agent_id
        assert "first job" in panel_text(run)
        assert "main says 42" in panel_text(run.main)
        saved_child = run.panels[child_id]  # the child's panel, nested under its task call, from its transcript
        assert saved_child.subagent and saved_child.state == "done"
        assert "child counted 3" in panel_text(saved_child)

        await view.run("MAIN: and now?")
        assert view.answer == "Resumed fine."
        last_request = main.requests[-1][-1]
        prompts = [p.content for p in last_request.parts if isinstance(p, UserPromptPart)]
        assert prompts == [RESUME_NOTE, "MAIN: and now?"]

        opened = view.transcript(child_id)  # a finished child's panel, opened from the saved transcript
        [child_run] = opened.children
        assert child_run.main.agent_id == child_id and "child counted 3" in panel_text(child_run)
