"""The timeline of a run: lanes and states from a scripted run with known waits, from its saved session, drawn.

One run serves every test: the main agent runs a cell whose approval the test holds back for
`HELD` seconds, then starts two children under a bound of one (the second waits for a slot);
each child runs a cell of `CELL` seconds.
"""

from __future__ import annotations

import asyncio
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from freeact_sub import Agent, AgentConfig, AgentEvent, ApprovalPolicy, ApprovalRequest, SubagentStarted, timeline
from freeact_sub.notebook.run_panel import RunPanel
from freeact_sub.notebook.saved import saved_runs
from freeact_sub.sessions import open_session
from tests.scripting import Call, Router, Script, drive, of

HELD = 0.4
CELL = 0.3


@dataclass
class Run:
    events: list[AgentEvent]
    main_id: str
    children: list[str]
    """The children's ids in the order they started."""
    workdir: Path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    workdir = tmp_path_factory.mktemp("timeline")
    cell = Call("execute_ipython_cell", {"code": f"import time; time.sleep({CELL})"})
    parent = Script(
        [Call("execute_ipython_cell", {"code": "x = 1"}, id="held")],
        [
            Call("task", {"prompt": "CHILD-1: a", "description": "first"}, id="t1"),
            Call("task", {"prompt": "CHILD-2: b", "description": "second"}, id="t2"),
        ],
        ["both done"],
    )
    children = {f"CHILD-{n}:": Script([cell], [f"done {n}"]) for n in (1, 2)}
    config = AgentConfig(
        model=Router({"PARENT": parent, **children}).model, working_dir=workdir, max_subagents=1, kernel_pool_size=0
    )
    loop = asyncio.get_running_loop()

    def decide(request: ApprovalRequest) -> bool | None:
        if request.tool_call_id == "held":
            loop.call_later(HELD, request.approve)  # a person who takes HELD seconds to decide
            return None
        return True

    async with Agent(config) as agent:
        events = await drive(agent.stream("PARENT go"), decide=decide)
    children_ids = [e.subagent_id for e in of(SubagentStarted, events)]
    return Run(events=events, main_id=agent.agent_id, children=children_ids, workdir=workdir)


def test_lanes_are_one_per_agent_children_after_their_parent(run: Run) -> None:
    picture = timeline(run.events)
    assert [lane.agent_id for lane in picture.lanes] == [run.main_id, *run.children]
    assert [(lane.parent_id, lane.depth) for lane in picture.lanes] == [(None, 0), (run.main_id, 1), (run.main_id, 1)]
    assert [lane.status for lane in picture.lanes] == ["done", "done", "done"]
    assert [lane.title for lane in picture.lanes[1:]] == ["general: first", "general: second"]


def test_the_held_approval_is_shown_as_waiting_and_the_cell_runs_after_it(run: Run) -> None:
    main = timeline(run.events).lane(run.main_id)
    (waiting,) = [s for s in main.spans if s.call == "held" and s.state == "waiting_for_approval"]
    (running,) = [s for s in main.spans if s.call == "held" and s.state == "running_code"]
    assert waiting.end is not None and waiting.end - waiting.start >= HELD
    assert running.start >= waiting.end and running.label == "execute_ipython_cell: x = 1"
    assert main.states()[:3] == ["thinking", "waiting_for_approval", "running_code"]
    assert [s.call for s in main.spans if s.state == "calling_tool"] == ["t1", "t2"]  # each task runs its child


def test_each_child_thinks_runs_its_cell_and_the_second_waited_for_a_slot(run: Run) -> None:
    picture = timeline(run.events)
    first, second = (picture.lane(agent_id) for agent_id in run.children)
    for lane in (first, second):
        # No pool: each child's kernel boots while its first model request runs, and its first cell (the scripted
        # model answers at once) waits for it: that wait is part of the child's start, drawn inside the cell's call.
        assert [s for s in lane.states() if s not in ("waiting_for_slot", "waiting_for_approval")] == [
            "starting",
            "thinking",
            "starting",
            "running_code",
            "thinking",
            "finishing",
        ]
        (cell,) = [s for s in lane.spans if s.state == "running_code"]
        assert cell.end is not None and cell.end - cell.start >= CELL
        (kernel_wait,) = [s for s in lane.spans if s.state == "starting" and s.call == cell.call]
        assert kernel_wait.call == cell.call and kernel_wait.end == cell.start and kernel_wait.end > kernel_wait.start
    (slot,) = [s for s in second.spans if s.state == "waiting_for_slot"]
    assert slot.call == "t2" and slot.end is not None
    (first_cell,) = [s for s in first.spans if s.state == "running_code"]
    assert first_cell.end is not None and slot.end >= first_cell.end  # its slot came free only after that cell
    assert not [s for s in first.spans if s.state == "waiting_for_slot"]


def test_a_saved_session_has_the_same_lanes_and_the_saved_approval_wait(run: Run) -> None:
    saved = timeline(open_session("latest", run.workdir))
    assert [lane.agent_id for lane in saved.lanes] == [run.main_id, *run.children]
    main = saved.lane(run.main_id)
    (waiting,) = [s for s in main.spans if s.call == "held" and s.state == "waiting_for_approval"]
    assert waiting.end is not None and waiting.end - waiting.start >= HELD
    for agent_id in run.children:
        lane = saved.lane(agent_id)
        assert lane.status == "done" and "running_code" in lane.states() and lane.parent_id == run.main_id
        cell_call = next(s.call for s in lane.spans if s.state == "running_code")
        (kernel_wait,) = [s for s in lane.spans if s.state == "starting" and s.call == cell_call]
        live = timeline(run.events).lane(agent_id).spans
        (live_wait,) = [s for s in live if s.state == "starting" and s.call == cell_call]
        assert kernel_wait.end - kernel_wait.start == pytest.approx(live_wait.end - live_wait.start)  # saved too
    live = timeline(run.events)
    assert saved.start == pytest.approx(live.start, abs=0.05)  # the saved times are the live ones

    # the notebook's panel of the saved turn draws the same lanes, ending at the run's end (not at "now")
    (panel,) = saved_runs(open_session("latest", run.workdir))
    drawn = panel.timeline.timeline
    assert drawn is not None and [lane.agent_id for lane in drawn.lanes] == [run.main_id, *run.children]
    assert drawn.end == pytest.approx(saved.end, abs=1e-3)


def test_svg_png_and_html_have_one_lane_per_agent(run: Run, tmp_path: Path) -> None:
    from matplotlib.image import imread

    picture = timeline(run.events)
    svg = picture.save(tmp_path / "timeline.svg").read_text()
    assert svg.startswith("<?xml") and len(re.findall(r'<g id="status-\d+">', svg)) == 3
    assert "approval wait: " in svg and "execute_ipython_cell: x = 1" in svg  # hover titles
    png = imread(io.BytesIO(picture.save(tmp_path / "timeline.png").read_bytes()))
    assert png.shape[0] > 100 and png.shape[1] > 100
    labels = [label.get_text() for label in picture.figure().axes[0].get_yticklabels()]
    assert len(labels) == 3 and "main" in labels[0] and labels[1].strip().startswith("general: first")
    page = picture.save(tmp_path / "timeline.html").read_text()
    assert page.count('class="fs-tl-lane"') == 3 and 'data-state="waiting_for_approval"' in page
    with pytest.raises(ValueError, match=r"name a \.svg, \.png or \.html file"):
        picture.save(tmp_path / "timeline.pdf")


def test_the_notebook_timeline_is_live_during_the_run_and_kept_in_the_static_copy(run: Run) -> None:
    panel = RunPanel(run.main_id, "PARENT go", policy=ApprovalPolicy(), on_stop=lambda: None)
    second_started = next(e for e in run.events if isinstance(e, SubagentStarted) and e.subagent_id == run.children[1])
    cut = run.events.index(second_started)
    for event in run.events[:cut]:
        panel.handle(event)
    panel.tick()
    live = panel.timeline.timeline
    assert live is not None and [lane.agent_id for lane in live.lanes] == [run.main_id, *run.children]
    assert live.lane(run.main_id).status == "running" and live.lane(run.children[1]).status == "running"
    assert 'data-state="waiting_for_slot"' in panel.timeline.value
    for event in run.events[cut:]:
        panel.handle(event)
    panel.end("done")
    assert panel.timeline.value.count('class="fs-tl-lane"') == 3
    assert all(lane.status == "done" for lane in panel.timeline.timeline.lanes)  # type: ignore[union-attr]
    static = panel.static_html()
    assert "fs-timeline" in static and static.count('class="fs-tl-lane"') == 3


def test_bad_input_is_refused_with_a_hint() -> None:
    with pytest.raises(TypeError, match="open_session"):
        timeline("latest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no events"):
        timeline([])
