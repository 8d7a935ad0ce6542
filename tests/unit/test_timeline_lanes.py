"""The timeline's lanes and spans from events with exact times (no kernel, no model: the times are given)."""

from __future__ import annotations

from freeact_sub import (
    ApprovalRequest,
    CodeExecutionOutput,
    ModelUsage,
    Response,
    SubagentFinished,
    SubagentQueued,
    SubagentStarted,
    TimelineBuilder,
    ToolOutput,
    TurnStarted,
)

MAIN, CHILD = "agent-main", "agent-child"


def spans(lane: object) -> list[tuple[str, float, float | None, str | None]]:
    return [(s.state, s.start, s.end, s.call) for s in lane.spans]  # type: ignore[attr-defined]


async def test_states_and_their_exact_times_and_a_pending_approval_that_is_decided_later() -> None:
    cell = ApprovalRequest(
        agent_id=MAIN, tool_name="execute_ipython_cell", tool_args={"code": "x = 1"}, tool_call_id="c1", at=101.0
    )
    task = ApprovalRequest(
        agent_id=MAIN, tool_name="task", tool_args={"prompt": "p", "description": "job"}, tool_call_id="t1", at=103.0
    )
    task.approve(at=102.9)  # decided by a standing approval before it was emitted: no wait shown
    builder = TimelineBuilder()
    for event in (
        TurnStarted(agent_id=MAIN, turn=1, at=100.0),
        ModelUsage(agent_id=MAIN, model_name="m", input_tokens=1, output_tokens=1, at=101.0),
        cell,
    ):
        builder.add(event)

    live = builder.build(now=101.2)
    assert spans(live.lane(MAIN)) == [("thinking", 100.0, 101.0, None), ("waiting_for_approval", 101.0, None, "c1")]
    assert live.lane(MAIN).status == "running" and live.end == 101.2

    cell.approve(at=101.5)  # the person decides after the picture was taken: the next picture shows it
    for event in (
        CodeExecutionOutput(agent_id=MAIN, content="", tool_call_id="c1", at=102.0),
        TurnStarted(agent_id=MAIN, turn=2, at=102.0),
        ModelUsage(agent_id=MAIN, model_name="m", input_tokens=1, output_tokens=1, at=102.5),
        task,
        SubagentQueued(agent_id=MAIN, subagent_id=CHILD, tool_call_id="t1", prompt="p", description="job", at=103.0),
        SubagentStarted(
            agent_id=MAIN, subagent_id=CHILD, tool_call_id="t1", prompt="p", max_turns=5, description="job", at=104.0
        ),
        TurnStarted(agent_id=CHILD, turn=1, at=104.25),
        Response(agent_id=CHILD, content="done", final=True, at=105.0),
        SubagentFinished(
            agent_id=MAIN, subagent_id=CHILD, tool_call_id="t1", status="done", turns_used=1, elapsed=1.0, at=105.5
        ),
        ToolOutput(agent_id=MAIN, content="done", tool_name="task", tool_call_id="t1", at=105.5),
        TurnStarted(agent_id=MAIN, turn=3, at=105.5),
        Response(agent_id=MAIN, content="all done", final=True, at=106.0),
    ):
        builder.add(event)

    picture = builder.build()
    assert [lane.agent_id for lane in picture.lanes] == [MAIN, CHILD]
    assert spans(picture.lane(MAIN)) == [
        ("thinking", 100.0, 101.0, None),
        ("waiting_for_approval", 101.0, 101.5, "c1"),
        ("running_code", 101.5, 102.0, "c1"),
        ("thinking", 102.0, 102.5, None),
        ("calling_tool", 103.0, 105.5, "t1"),
        ("thinking", 105.5, 106.0, None),
    ]
    child = picture.lane(CHILD)
    assert (child.parent_id, child.depth, child.title, child.status, child.end) == (
        MAIN,
        1,
        "general: job",
        "done",
        105.5,
    )
    assert spans(child) == [
        ("waiting_for_slot", 103.0, 104.0, "t1"),
        ("starting", 104.0, 104.25, "t1"),
        ("thinking", 104.25, 105.0, None),
        ("finishing", 105.0, 105.5, None),
    ]
    assert picture.lane(MAIN).status == "done" and (picture.start, picture.end) == (100.0, 106.0)


def test_a_lane_says_which_job_even_without_a_title() -> None:
    """A `task` call without a `description` gave lanes like `general (c306)`; they now carry the prompt's first
    words, and a legend entry keeps its label beside its swatch (it does not wrap between them)."""
    from freeact_sub.timelines.render import to_html

    builder = TimelineBuilder()
    for event in (
        TurnStarted(agent_id=MAIN, turn=1, at=100.0),
        SubagentStarted(agent_id=MAIN, subagent_id=CHILD, tool_call_id="t1", max_turns=5, at=101.0,
                        prompt="Count the primes below 200,000 with a sieve and print the count"),
        SubagentStarted(agent_id=MAIN, subagent_id="agent-titled", tool_call_id="t2", max_turns=5, at=101.0,
                        prompt="p", description="Review the summary"),
    ):
        builder.add(event)
    picture = builder.build(now=102.0)
    assert picture.lane(CHILD).title == "general: Count the primes below 200,000 with …"
    assert picture.lane("agent-titled").title == "general: Review the summary"
    assert 'margin-right:1em;white-space:nowrap"><i' in to_html(picture)


def test_the_pictures_legend_fits_the_figure_and_names_the_states_that_occur() -> None:
    from freeact_sub.timelines.lanes import SPAN_STATES, Lane, Span, TimelineData
    from freeact_sub.timelines.render import STATE_NAMES, figure

    every = Lane(agent_id="agent-main", title="main", spans=[Span(state=state, start=i, end=i + 1)
                                                               for i, state in enumerate(SPAN_STATES)])
    fig = figure(TimelineData(lanes=[every], start=0.0, end=float(len(SPAN_STATES))))
    fig.canvas.draw()
    legend = fig.legends[0]
    box, frame = legend.get_window_extent(), fig.bbox
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and box.y1 <= frame.y1, (box, frame)  # nothing cut (`fini`)
    assert [t.get_text() for t in legend.get_texts()] == [STATE_NAMES[s] for s in SPAN_STATES]

    one = Lane(agent_id="agent-main", spans=[Span(state=SPAN_STATES[0], start=0.0, end=1.0)])
    legend = figure(TimelineData(lanes=[one], start=0.0, end=1.0)).legends[0]
    assert [t.get_text() for t in legend.get_texts()] == [STATE_NAMES[SPAN_STATES[0]]]


def test_the_html_legend_lists_only_the_states_the_run_went_through() -> None:
    """A one-cell run listed all ten states; the legend now names those its bars show, in the usual order."""
    from freeact_sub.timelines.render import to_html

    builder = TimelineBuilder()
    builder.add(TurnStarted(agent_id=MAIN, turn=1, at=100.0))
    picture = builder.build(now=101.0)
    states = {span.state for lane in picture.lanes for span in lane.spans}
    legend = to_html(picture).split('class="fs-tl-legend"', 1)[1].split("</div>", 1)[0]
    assert legend.count("<i ") == len(states) >= 1
    assert "tool call" not in legend and "slot wait" not in legend and "running code" not in legend
