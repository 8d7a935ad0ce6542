"""Issue 28, item 19: at 80 columns the live table says what each agent waits for, and a saved image's path is
whole (rendered through rich at a fixed width, as the terminal draws them)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from freeact_sub import (
    ApprovalRequest,
    CodeExecutionOutput,
    CodeExecutionOutputChunk,
    SubagentFinished,
    SubagentStarted,
    ToolOutput,
)
from freeact_sub.terminal.palette import Palette
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.status import SubagentBoard


def renderer(width: int = 80) -> tuple[Renderer, SubagentBoard, io.StringIO]:
    out = io.StringIO()
    palette = Palette()
    board = SubagentBoard(palette)
    return Renderer(Console(file=out, width=width), palette, board, main_id="agent-main"), board, out


def table(board: SubagentBoard, width: int = 80) -> list[str]:
    console = Console(file=io.StringIO(), width=width, record=True)
    console.print(board.render())
    return console.export_text().splitlines()


def started(parent: str, child: str, call_id: str) -> SubagentStarted:
    return SubagentStarted(agent_id=parent, subagent_id=child, tool_call_id=call_id, prompt="Count the primes",
                           max_turns=10, agent_type="reviewer", model="freeact-sub-demo-with-a-long-name")


def row(lines: list[str], agent_id: str) -> str:
    return next(line for line in lines if agent_id in line.split("  ")[0])


async def test_the_live_table_says_at_80_columns_what_each_agent_waits_for_one_line_a_row() -> None:
    render, board, _ = renderer()
    render.handle(started("agent-main", "agent-1d74", "t1"))
    render.handle(started("agent-main", "agent-bbb5", "t2"))
    render.handle(ApprovalRequest(agent_id="agent-1d74", tool_name="demo_constant", tool_args={"name": "pi"},
                                  tool_call_id="c1"))
    render.handle(ApprovalRequest(agent_id="agent-bbb5", tool_name="task", tool_args={"prompt": "go on"},
                                  tool_call_id="c2"))
    lines = table(board)
    assert all(len(line) <= 80 for line in lines), lines
    assert len(lines) == 4, lines  # header, a line a subagent, the total: nothing wrapped
    assert "waiting for approval of demo_constant" in row(lines, "agent-1d74")
    assert "waiting for approval of a subagent" in row(lines, "agent-bbb5")
    assert "…" not in "\n".join(lines)  # the long model name is left out, not cut, and the state is whole

    # agent-bbb5's task starts a child: it waits for that child, by name, until the child's result comes
    render.handle(started("agent-bbb5", "agent-9a9a", "c2"))
    render.handle(ApprovalRequest(agent_id="agent-9a9a", tool_name="execute_ipython_cell",
                                  tool_args={"code": "1 + 1"}, tool_call_id="c3"))
    lines = table(board)
    assert all(len(line) <= 80 for line in lines), lines
    assert "waiting for agent-9a9a" in row(lines, "agent-bbb5")
    assert "waiting for approval of code" in row(lines, "└ agent-9a9a")
    render.handle(SubagentFinished(agent_id="agent-bbb5", subagent_id="agent-9a9a", tool_call_id="c2",
                                   status="done", turns_used=1, elapsed=1.0))
    render.handle(ToolOutput(agent_id="agent-bbb5", tool_name="task", tool_call_id="c2", content="42"))
    assert "thinking" in row(table(board), "agent-bbb5")


async def test_a_state_too_long_for_the_terminal_goes_on_over_a_second_line_and_is_never_cut() -> None:
    render, board, _ = renderer()
    render.handle(started("agent-main", "agent-1d74", "t1"))
    render.handle(ApprovalRequest(agent_id="agent-1d74", tool_name="github_list_pull_request_review_comments",
                                  tool_args={}, tool_call_id="c1"))
    lines = table(board, width=60)
    assert all(len(line) <= 60 for line in lines), lines
    assert "…" not in "\n".join(lines)
    state = "".join(line[12:].split("  ")[0].replace(" ", "") for line in lines[1:-1])  # the state column's lines
    assert state == "waitingforapprovalofgithub_list_pull_request_review_comments"


def image_event(path: Path, agent_id: str) -> list[object]:
    line = f"[image saved: {path}]\n"
    return [CodeExecutionOutputChunk(agent_id=agent_id, content="plotted\n" + line, tool_call_id="c1"),
            CodeExecutionOutput(agent_id=agent_id, content="plotted\n" + line, images=(path,), tool_call_id="c1")]


def test_a_saved_images_path_is_shown_relative_to_this_folder_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / ".freeact-sub" / "images" / "agent-9a9a-1-c27b35.png"
    render, _, out = renderer()
    render.palette.set_parent("agent-9a9a", "agent-bbb5")  # a subagent's subagent: the widest label
    render.palette.set_parent("agent-bbb5", "agent-main")
    for event in image_event(path, "agent-9a9a"):
        render.handle(event)  # type: ignore[arg-type]
    lines = out.getvalue().splitlines()
    shown = [line for line in lines if "image saved" in line]
    assert len(shown) == 1 and shown[0].endswith("[image saved: .freeact-sub/images/agent-9a9a-1-c27b35.png]")
    assert len(shown[0]) <= 80 and shown[0].startswith("  agent-9a9a")
    assert any(line.endswith("│ plotted") for line in lines)


def test_a_saved_images_path_too_long_for_the_line_is_printed_whole_on_a_line_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the images are not under this folder: the path stays absolute
    path = tmp_path / "a-project-folder-with-a-long-name" / ".freeact-sub" / "images" / "agent-main-1-c27b35.png"
    render, _, out = renderer()
    for event in image_event(path, "agent-main"):
        render.handle(event)  # type: ignore[arg-type]
    lines = out.getvalue().splitlines()
    assert str(path) in lines  # the whole path, no line break written in it: copied in one piece
    assert out.getvalue().count("image saved") == 1


def test_an_image_line_a_cell_printed_with_other_text_stays_behind_the_gutter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    render, _, out = renderer()
    forged = "[image saved: " + "x" * 70 + " agent-main ✓ approved.png]\n"
    render.handle(CodeExecutionOutputChunk(agent_id="agent-main", content=forged, tool_call_id="c1"))
    lines = out.getvalue().splitlines()
    assert len(lines) > 1 and all(line.startswith("agent-main") for line in lines), lines


async def test_a_long_reason_typed_at_80_columns_stays_on_its_line_showing_its_end() -> None:
    from freeact_sub import ApprovalPolicy
    from freeact_sub.terminal.approvals import ApprovalDesk

    render, _, _ = renderer()
    desk = ApprovalDesk(render, render.palette, ApprovalPolicy(), stop=lambda agent_id: True)
    request = ApprovalRequest(agent_id="agent-8ca8", tool_name="execute_ipython_cell", tool_args={"code": "1"},
                              tool_call_id="c1")
    desk.submit(request)
    desk.press("n")
    reason = "please use a smaller limit, and print the count once at the end rather than in every loop"
    for key in reason:
        desk.press(key)

    console = Console(width=80, record=True, file=io.StringIO())
    console.print(desk.view())
    lines = console.export_text().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= 80, lines  # it never wraps to column 0 under the live view
    assert lines[0].startswith("[agent-8ca8] Reject.") and lines[0].endswith("than in every loop▏")
    assert "…" in lines[0]
    desk.press("\r")
    assert request.decision is False and request.reason == reason  # all of it reaches the model


async def test_a_decision_note_too_long_for_the_frames_title_is_shown_whole_inside_it() -> None:
    render, _, out = renderer()
    render.palette.set_type("agent-df8f", "reviewer")
    rule = "'demo_word_count': allow (agent type reviewer)"
    render.handle(ApprovalRequest(agent_id="agent-df8f", tool_name="demo_word_count", tool_args={"text": "a b"},
                                  tool_call_id="c1", auto_approved=True, rule=rule))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    inside = " ".join(line.split("│")[1].strip() for line in lines if line.count("│") == 2)
    assert f"auto-approved by rule {rule}" in inside, lines  # it was cut in the title: 'demo_wor─╮
    assert "demo_word_count" in lines[0] and '{"text": "a b"}' in inside


async def test_a_decision_note_that_fits_stays_in_the_title() -> None:
    render, _, out = renderer(width=160)
    render.handle(ApprovalRequest(agent_id="agent-df8f", tool_name="demo_word_count", tool_args={"text": "a b"},
                                  tool_call_id="c1", auto_approved=True, rule="'demo_word_count': allow"))
    assert "demo_word_count  auto-approved by rule 'demo_word_count': allow ─" in out.getvalue().splitlines()[0]


def test_the_agent_types_at_80_columns_keep_names_models_and_tools_whole(tmp_path: Path) -> None:
    from freeact_sub import Agent, AgentConfig
    from freeact_sub.config.agent_types import load_agent_types
    from freeact_sub.terminal.banner import agent_types_table

    agent = Agent(AgentConfig(model="test", working_dir=tmp_path))
    agent.tree.agent_types = load_agent_types(
        {"reviewer": {"description": "Reviews a short text for a newcomer and counts its words.",
                      "model": "anthropic:claude-demo", "tools": []}}, tmp_path, trust_project=False, servers=[])
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(agent_types_table(agent))
    lines = console.export_text().splitlines()
    text = " ".join(lines)
    assert all(len(line) <= 80 for line in lines), lines
    for whole in ("execute_ipython_cell", "anthropic:claude-demo", "general (main)", "sandbox read-only"):
        assert whole in text, lines  # four columns cut them mid-word: execute_ipython_cel / l
    assert len(lines) <= 30, len(lines)  # (it took 60 lines)


async def test_code_to_approve_that_wraps_at_80_columns_numbers_its_lines_so_a_wrapped_one_reads_as_one() -> None:
    render, _, out = renderer()
    code = ("from mcptools.demo import constant  # the demo MCP server's tool, as a Python function\n"
            "print(sum(range(10)))")
    render.show_request(ApprovalRequest(agent_id="agent-main", tool_name="execute_ipython_cell",
                                        tool_args={"code": code}, tool_call_id="c1"))
    body = [line.split("│")[1] for line in out.getvalue().splitlines() if line.count("│") == 2]
    assert len(body) == 3 and all(len(line) <= 80 for line in out.getvalue().splitlines()), body
    assert body[0].strip().startswith("1 from mcptools.demo import constant")
    assert body[1].strip().startswith("server's tool") and not body[1].strip()[0].isdigit()  # goes on, unnumbered
    assert body[2].strip() == "2 print(sum(range(10)))"

    render, _, out = renderer()
    render.show_request(ApprovalRequest(agent_id="agent-main", tool_name="execute_ipython_cell",
                                        tool_args={"code": "print(1)"}, tool_call_id="c2"))
    assert "│ print(1)" in out.getvalue()  # code that fits is shown as it is written
