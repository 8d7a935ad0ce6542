"""The pictures of docs/isolation.md: the terminal's `apply_changes` decision (a child's change set, a diff per
file) and `/rewind`'s list of turns, drawn by the terminal's own renderer at 100 columns (dark) and saved by rich
as SVG. Every run writes them to `test-artifacts/`; with `FREEACT_SUB_UPDATE_DOCS_PICTURES=1` they replace the
docs' copies. Real files, a real change set and real checkpoints; no agent (nothing here needs a model)."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

from rich.console import Console
from rich.terminal_theme import SVG_EXPORT_THEME

from freeact_sub import ApprovalRequest
from freeact_sub.terminal.palette import Palette
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.rewind_cmd import turns_table
from freeact_sub.terminal.status import SubagentBoard
from freeact_sub.terminal.theme import theme_for
from freeact_sub.workspaces import Checkpoints, read_changes

ROOT = Path(__file__).resolve().parents[2]
FONT_FACE = re.compile(r"@font-face\s*\{[^}]*\}")


def _console() -> Console:
    return Console(record=True, width=100, force_terminal=True, color_system="truecolor", file=io.StringIO())


def _save(console: Console, name: str) -> str:
    svg = FONT_FACE.sub("", console.export_svg(title="freeact-sub", theme=SVG_EXPORT_THEME, clear=False))
    out = ROOT / "test-artifacts"
    out.mkdir(exist_ok=True)
    (out / name).write_text(svg, encoding="utf-8")
    if os.environ.get("FREEACT_SUB_UPDATE_DOCS_PICTURES") == "1":
        (ROOT / "docs" / name).write_text(svg, encoding="utf-8")
    return console.export_text()


class _Turns:
    """What `turns_table` reads of an agent: its checkpoints (real ones, of a real folder)."""

    def __init__(self, points: Checkpoints) -> None:
        self.points = points

    def checkpoints(self) -> list:  # type: ignore[type-arg]
        return self.points.checkpoints()


async def test_the_change_set_decision_and_the_rewind_list_are_drawn(tmp_path: Path) -> None:
    folder, upper = tmp_path / "work", tmp_path / "upper"
    folder.mkdir()
    upper.mkdir()
    (folder / "report.csv").write_text("city,rain_mm\nVienna,620\nLima,16\n")
    (upper / "report.csv").write_text("city,rain_mm\nVienna,620\nLima,16\nOslo,760\n")
    (upper / "summary.md").write_text("# Rain\n\nOslo is the wettest of the three.\n")
    changes = read_changes(upper, folder, agent_id="agent-3fa2")
    changes.changes[0].conflict = "it changed in the folder too since the subagent started"
    palette = Palette({}, theme_for("dark"))
    console = _console()
    renderer = Renderer(console, palette, SubagentBoard(palette), main_id="agent-main")
    request = ApprovalRequest(
        agent_id="agent-main",
        tool_name="apply_changes",
        tool_call_id="t1/apply_changes",
        tool_args={"agent_id": "agent-3fa2"},
        changes=changes,
    )
    renderer.show_request(request)
    shown = _save(console, "isolation-apply.svg")
    assert "+Oslo,760" in shown and "summary.md" in shown and "changed in the folder too" in shown

    points = Checkpoints(tmp_path / "store", folder, watch=False)
    try:
        points.take(label="write the rainfall table", turn=1)
        (folder / "report.csv").write_text("city,rain_mm\nVienna,620\n")
        (folder / "notes.txt").write_text("rainfall table written\n")
        points.take(label="write the rainfall table", turn=2)
        points.take(label="add Oslo", turn=1)
        console = _console()
        console.print("you › /rewind")
        console.print(turns_table(_Turns(points)))  # type: ignore[arg-type]
        shown = _save(console, "isolation-rewind.svg")
    finally:
        points.close()
    assert "1. of “write the rainfall table”" in shown and "notes.txt, report.csv" in shown
