"""A `map_tasks` batch of 50 rows as the terminal and the notebook show it: one grouped, compact view.

One real agent (a real kernel) runs one cell that maps 50 rows through scripted children (their type runs no code,
so they need no kernels; row 13's model breaks); the events of that turn are then shown by the terminal's renderer
at 80 and 160 columns and by the notebook's run panel (real ipywidgets).
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
import pytest_asyncio
from rich.console import Console
from rich.terminal_theme import SVG_EXPORT_THEME
from rich.text import Text

from freeact_sub import (
    Agent,
    AgentConfig,
    AgentEvent,
    ApprovalPolicy,
    ApprovalRequest,
    SubagentStarted,
)
from freeact_sub.config.definitions import AgentType
from freeact_sub.notebook.agent_panel import AgentPanel
from freeact_sub.notebook.batch_card import BatchCard
from freeact_sub.notebook.call_view import CallView
from freeact_sub.notebook.run_panel import RunPanel
from freeact_sub.terminal.approvals import ApprovalDesk
from freeact_sub.terminal.palette import Palette
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.status import SubagentBoard
from freeact_sub.timelines.lanes import TimelineBuilder
from tests.integration.test_tasks_from_code import PARENT, Children, cell
from tests.integration.test_terminal_picture import FONT_FACE
from tests.scripting import Script, drive, of

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).resolve().parents[2]

ROWS = 50
MAP = f"""
from freeact_sub_tasks import map_tasks
out = await map_tasks("Label row {{n}}", [{{"n": i}} for i in range({ROWS})], agent_type="labeler")
print(sum(isinstance(o, str) for o in out), "answered")
"""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def batch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Agent, list[AgentEvent]]:
    script = Script()
    children = Children(script)
    config = AgentConfig(
        model=children.model,
        working_dir=tmp_path_factory.mktemp("batch-views"),
        kernel_pool_size=0,
        mcp_pool_size=0,
        max_subagents=8,
        agents={"labeler": AgentType(description="Labels one row.", tools=[])},
    )
    async with Agent(config) as agent:
        script.reset([cell(MAP)], ["done"])
        events = await drive(agent.stream(f"{PARENT}: label the rows"), True, limit=120)
        yield agent, events


def terminal(width: int) -> tuple[Renderer, ApprovalDesk, io.StringIO]:
    output = io.StringIO()
    palette = Palette()
    renderer = Renderer(Console(file=output, width=width), palette, SubagentBoard(palette), main_id="")
    return renderer, ApprovalDesk(renderer, palette, ApprovalPolicy()), output


def show(renderer: Renderer, events: list[AgentEvent]) -> None:
    """The events as a terminal session shows them: each question a person answered shown, then its decision."""
    for event in events:
        renderer.handle(event)
        if isinstance(event, ApprovalRequest) and not event.auto_approved and event.decision:
            renderer.show_request(event)
            renderer.show_decision(event, "approved", approved=True)


def screen(renderable: object, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


@pytest.mark.parametrize("width", [80, 160])
async def test_the_terminal_shows_a_batch_of_50_in_a_bounded_number_of_lines(batch, width: int) -> None:
    agent, events = batch
    renderer, _, output = terminal(width)
    renderer.main_id = agent.agent_id
    show(renderer, events)
    lines = output.getvalue().splitlines()
    text = "\n".join(lines)
    assert len(lines) <= 40, f"{len(lines)} lines for a batch of {ROWS}:\n{text}"
    assert all(len(line) <= width for line in lines)
    flat = " ".join(text.split())
    # the question: the template, the count, and one worked example (the first row filled in)
    assert "Label row {n}" in flat and f"a batch of {ROWS} subagents" in flat
    assert f"row 1 of {ROWS}: Label row 0" in flat
    # the failure expanded on one line: its row, its subagent, its error; the end in one summary line
    failed = [line for line in lines if "✗ row 14 " in line]
    assert len(failed) == 1 and re.search(r"row 14 agent-[0-9a-f]+ failed: ", failed[0]), text
    assert "row 13 broke" in failed[0] or failed[0].endswith("…")
    (summary,) = [line for line in lines if "■ batch of 50 ended in " in line]
    assert re.search(r"ended in [\d.]+ s: 49 done · 1 failed · [\d,]+ tokens", summary), summary
    assert "Label row 13" not in text and "result of" not in text, "no row prints its own lines"


@pytest.mark.parametrize("width", [80, 160])
async def test_the_live_view_shows_progress_and_slash_batch_lists_every_row(batch, width: int) -> None:
    agent, events = batch
    renderer, desk, output = terminal(width)
    renderer.main_id = agent.agent_id
    half = [i for i, e in enumerate(events) if getattr(e, "tool_call_id", "").endswith("/row-25")][-1]
    show(renderer, events[: half + 1])
    live = screen(renderer.batches.live(width)[0], width).splitlines()
    assert len(live) == 2 and all(len(line) <= width for line in live)
    progress = re.search(r"(\d+)/50 · (\d+) done · (\d+) running · (\d+) failed · ETA \d", live[1])
    assert progress is not None, live
    assert 1 <= int(progress.group(1)) < ROWS and int(progress.group(4)) == 1
    # a row's question that waits for a person names the row
    rows = {e.tool_call_id: e.subagent_id for e in of(SubagentStarted, events)}
    child = rows[next(c for c in rows if c.endswith("/row-3"))]
    question = ApprovalRequest(
        agent_id=child, tool_name="execute_ipython_cell", tool_args={"code": "1"}, tool_call_id="q1"
    )
    desk.submit(question)
    assert f"[{child}] (row 3 of 50) Run this code?" in " ".join(screen(desk.view(), width).split())
    assert "execute_ipython_cell · batch row 3 of 50" in " ".join(output.getvalue().split())  # its panel too
    cancelled, _, _ = terminal(width)  # a turn that ended mid-batch (cancelled): the next turn shows no stale line
    show(cancelled, events[: half + 1])
    cancelled.reset()
    assert cancelled.batches.live(width) == []
    show(renderer, events[half + 1 :])
    assert renderer.batches.live(width) == [], "a batch that ended leaves the live view"
    table = screen(renderer.batches.table(width=width), width).splitlines()
    assert len(table) == ROWS + 2 and all(len(line) <= width for line in table)
    assert re.match(r"batch of 50 · Label row \{n\} · 49 done · 0 running · 1 failed", table[0])
    assert re.match(r"\s*14 +failed +agent-[0-9a-f]+ ", table[15]) and re.match(r"\s*1 +done ", table[2])
    question.approve(False)


def run_panel(agent: Agent, events: list[AgentEvent]) -> RunPanel:
    panel = RunPanel(agent.agent_id, "label the rows", policy=ApprovalPolicy(), on_stop=lambda: None)
    for event in events:
        panel.handle(event)
    return panel


def batch_call(panel: RunPanel) -> CallView:
    (call_id,) = [c for c in panel.main.calls if c.endswith("/code-tasks-1")]
    return panel.main.calls[call_id]


async def test_the_notebook_groups_a_batch_in_one_card_with_a_progress_bar_and_its_rows(batch) -> None:
    agent, events = batch
    half = [i for i, e in enumerate(events) if getattr(e, "tool_call_id", "").endswith("/row-25")][-1]
    panel = run_panel(agent, events[: half + 1])
    question = batch_call(panel)
    assert "Label row {n}" in question._body.value and "Row 1 of 50, as its subagent reads it" in question._body.value
    assert "Label row 0" in question._body.value  # the worked example: the first row filled in
    (card,) = [w for w in question._subagents.children if isinstance(w, BatchCard)]
    assert card.progress.max == ROWS and 1 <= card.progress.value < ROWS  # progressive: half way
    # the rows are under the batch's card, not flat in the cell after it
    cell = panel.main.calls["cell"]
    assert [w for w in cell._subagents.children if isinstance(w, CallView)] == [question]
    for event in events[half + 1 :]:
        panel.handle(event)
    assert card.progress.value == ROWS and card.progress.bar_style == "danger"
    assert re.search(r"<b>50/50</b> · 49 done · 0 running · 1 failed · took [\d.]+s · [\d,]+ tokens", card.counts.value)
    assert sorted(card.rows) == list(range(1, ROWS + 1)) and list(card.rows) == sorted(card.rows)
    row = card.rows[14]
    assert 'data-state="failed"' in row.line.value and "row 13 broke" in row.line.value
    assert 'data-state="done"' in card.rows[1].line.value and "&quot;row&quot;: 0" in card.rows[1].line.value
    # each row's full card (its call, its child's panel) is folded under its row and opens on demand
    (call,) = row.details.children
    assert isinstance(call, CallView) and isinstance(call._subagents.children[0], AgentPanel)
    assert not row.expanded and row.details.layout.display == "none"
    static = panel.static_html()
    assert static.count("freeact-batch-row-view") == ROWS and "<b>50/50</b>" in static
    folded = re.findall(r'<details class="freeact-vbox freeact-batch-row-view"[^>]*>', static)
    assert len(folded) == ROWS and not any(" open" in tag for tag in folded), "saved: each row folded"
    row.toggle.click()
    assert row.expanded and row.details.layout.display != "none"
    # a row's child asks a person: its row opens by itself, nothing moves, and the question answers
    rows_before = card._rows.children
    child = card.batch.rows[3].agent_id
    question3 = ApprovalRequest(
        agent_id=child, tool_name="execute_ipython_cell", tool_args={"code": "1"}, tool_call_id="q3"
    )
    panel.handle(question3)
    assert card.rows[3].expanded and card._rows.children == rows_before
    asking = panel.panels[child].calls["q3"]
    assert asking.approval is not None
    asking.approval.approve_button.click()
    assert question3.decision is True


async def test_the_timeline_names_each_row_by_its_own_input(batch) -> None:
    _, events = batch
    builder = TimelineBuilder()
    for event in events:
        builder.add(event)
    titles = [lane.title for lane in builder.build().lanes if lane.parent_id is not None]
    assert len(titles) == ROWS and len(set(titles)) == ROWS, titles[:3]
    assert titles[0] == "labeler: row 1: …0" and titles[49] == "labeler: row 50: …49"


async def test_the_terminal_page_shows_a_batch_in_a_picture(batch) -> None:
    """`docs/terminal-batch.svg`: the batch's question, its live progress line, a failed row, its end and `/batch`,
    drawn by the renderer at 80 columns (dark) and saved by rich; `FREEACT_SUB_UPDATE_DOCS_PICTURES=1` refreshes it."""
    agent, events = batch
    console = Console(record=True, width=80, force_terminal=True, color_system="truecolor", file=io.StringIO())
    palette = Palette()
    renderer = Renderer(console, palette, SubagentBoard(palette), main_id=agent.agent_id)
    half = [i for i, e in enumerate(events) if getattr(e, "tool_call_id", "").endswith("/row-25")][-1]
    cell_done = next(i for i, e in enumerate(events) if i > half and getattr(e, "tool_call_id", "") == "cell")
    show(renderer, events[: half + 1])
    console.print(Text("   … while it runs, the live view's last lines:", style="dim italic"))
    console.print(*renderer.batches.live(80))
    console.print(Text("   … and once it ended:", style="dim italic"))
    show(renderer, events[half + 1 : cell_done])
    console.print(Text("you › /batch", style="bold"))
    table = screen(renderer.batches.table(width=80), 80).splitlines()
    coloured = Console(width=80, force_terminal=True, color_system="truecolor", file=io.StringIO())
    with coloured.capture() as captured:
        coloured.print(renderer.batches.table(width=80))
    lines = captured.get().splitlines()
    for line in [*lines[:17], *lines[-2:]]:  # the picture shows the first rows and the last
        console.print(Text.from_ansi(line), no_wrap=True)
        if line is lines[16]:
            console.print(Text("   … rows 16 to 48 …", style="dim italic"))
    svg = FONT_FACE.sub("", console.export_svg(title="freeact-sub · a batch of 50", theme=SVG_EXPORT_THEME))
    text = re.sub(r"<[^>]+>", "", svg).replace("&#160;", " ")
    assert "row 1 of 50: Label row 0" in text and "ETA" in text and "✗ row 14" in text and "ended in" in text
    assert len(table) == ROWS + 2
    assert not re.search(r"url\(\s*[\"']?https?:", svg) and "@font-face" not in svg
    out = ROOT / "test-artifacts"
    out.mkdir(exist_ok=True)
    (out / "terminal-batch.svg").write_text(svg, encoding="utf-8")
    if os.environ.get("FREEACT_SUB_UPDATE_DOCS_PICTURES") == "1":
        (ROOT / "docs" / "terminal-batch.svg").write_text(svg, encoding="utf-8")
