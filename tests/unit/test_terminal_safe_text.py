"""What the terminal shows of text it did not write: each class of control sequence, the console floor,
and the gutter that keeps such text off the left edge."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Group
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

from freeact_sub import ApprovalRequest, CodeExecutionOutput, CodeExecutionOutputChunk, Response, ToolOutput
from freeact_sub.terminal.gutter import Gutter
from freeact_sub.terminal.palette import Palette
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.safe_text import ansi_text, clean, message, visible
from freeact_sub.terminal.screen import ScreenConsole
from freeact_sub.terminal.status import SubagentBoard

TERMINAL_PACKAGE = Path(__file__).parents[2] / "freeact_sub" / "terminal"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\x1bcb", "ab"),  # RIS: the terminal resets
        ("a\x1b7\x1b8\x1bM\x1b(B\x1b#8b", "ab"),  # save/restore cursor, reverse index, charset, screen fill
        ("a\x1b[2J\x1b[H\x1b[5A\x1b[?25l\x1b[>4;2m\x1b[?1049hb", "ab"),  # CSI: erase, move, modes; not SGR
        ("a\x9b2J\x9b1;1Hb", "ab"),  # the 8-bit CSI
        ("a\x1b]52;c;SGVsbG8=\x07b", "ab"),  # OSC 52 clipboard write, BEL-terminated
        ("a\x1b]52;c;SGVsbG8=\x1b\\b", "ab"),  # … ST-terminated
        ("a\x1b]0;pwned\x9cb", "ab"),  # a window title, 8-bit ST
        ("a\x9d2;pwned\x07b", "ab"),  # the 8-bit OSC
        ("a\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\b", "aclickb"),  # a hyperlink's hidden target
        ("a\x1bPq#0;2;0;0;0\x1b\\b", "ab"),  # DCS (sixel)
        ("a\x1b_Gf=100;AAAA\x1b\\b\x1bXsos\x1b\\\x1b^pm\x1b\\", "ab"),  # APC (kitty graphics), SOS, PM
        ("a\x90dcs\x9cb\x98x\x9c\x9ey\x9c\x9fz\x9c", "ab"),  # their 8-bit forms
        ("a\x1b]52;c;never ends\nnext", "a\nnext"),  # an unterminated string ends with its line
        ("a\x07\x08\x0b\x0c\x00\x1f\x7fb", "ab"),  # C0, DEL
        ("a\x80\x85\x8d\x9fb", "ab"),  # C1
        ("a\x1b", "a"),  # a lone ESC
        ("a\u202eevil\u202c\u2066x\u2069b", "aevilxb"),  # bidi overrides and isolates
        ("a\u200b\u2060\ufeff\U000e0041b", "ab"),  # zero-width space, word joiner, BOM, a tag character
        ("a\u2028b\u2029c", "abc"),  # only \n breaks a line
        ("kept:\t\u200d\u200c\u200e\u00ad.\n", "kept:\t\u200d\u200c\u200e\u00ad.\n"),  # ZWJ/ZWNJ, LRM, soft hyphen
        ("p\x1b[31mred\x1b[0m", "pred"),  # prose keeps no colour either
    ],
)
def test_clean_removes_every_control_but_newline_and_tab(raw: str, shown: str) -> None:
    assert clean(raw) == shown
    assert clean(raw, keep_sgr=True) == shown.replace("pred", "p\x1b[31mred\x1b[0m")


def test_only_sgr_colours_survive_in_kernel_output_and_become_rich_styles() -> None:
    raw = "\x1b[1;31mbold red\x1b[0m \x1b[38;5;208mo\x1b[38:2::1:2:3mx\x1b[m \x1b[2Jgone?"
    assert clean(raw, keep_sgr=True) == "\x1b[1;31mbold red\x1b[0m \x1b[38;5;208mo\x1b[38:2::1:2:3mx\x1b[m gone?"
    text = ansi_text("\x1bc\x1b[31mred\x1b[0m\x9b2J")
    assert text.plain == "red" and [str(span.style) for span in text.spans] == ["color(1)"]


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("10%\r50%\r100%", "100%"),  # a progress bar shows its last state
        ("done\r", "done"),  # a return that nothing overwrote
        ("a\r\nb\r\n", "a\nb\n"),  # CRLF is a newline
        ("harmless\r[agent-3fa2] auto-approved", "[agent-3fa2] auto-approved"),  # never over our gutter
        ("x\r\x1b[K", "x"),  # an erase is not obeyed: the last part that shows anything stays
    ],
)
def test_a_carriage_return_restarts_its_line_without_moving_the_cursor(raw: str, shown: str) -> None:
    assert clean(raw) == shown
    assert "\r" not in clean(raw, keep_sgr=True)


def test_what_a_person_approves_is_shown_whole_with_controls_drawn() -> None:
    code = 'x = "\x1b[8mhidden"\rimport os\u202e  # \u200bnote\x9b\x7f'
    assert visible(code) == 'x = "␛[8mhidden"\nimport os⟨U+202E⟩  # ⟨U+200B⟩note⟨U+009B⟩␡'
    assert visible("a\r\nb\tc") == "a\nb\tc"
    assert visible("zero\u200dwidth joiner") == "zero⟨U+200D⟩width joiner"  # invisible: shown in code to approve


def test_a_message_line_is_clean_and_its_further_lines_are_behind_a_bar() -> None:
    assert message("bad\x1bc\nagent-3fa2 ✓ approved") == "bad\n  │ agent-3fa2 ✓ approved"


def _console(width: int = 80) -> tuple[ScreenConsole, io.StringIO]:
    out = io.StringIO()
    return ScreenConsole(file=out, force_terminal=True, width=width, color_system="truecolor"), out


def test_the_screen_console_writes_no_control_rich_did_not_make() -> None:
    console, out = _console()
    table = Table("name", "description")
    table.add_row("[bold]x[/bold] [link=https://evil.example]y[/link]", "desc\x1b]0;title\x07 \x1bc\u202e")
    console.print(table)
    console.print(Markdown("[click](https://evil.example) \x9b2J"))  # hyperlinks on: the console drops the link
    console.print(Text("concealed", style="conceal"), Text("\x1b[2J", style="bold"))
    console.print(Group(Text.from_ansi("\x1b]8;;https://evil.example\x1b\\x\x1b]8;;\x1b\\")))
    raw = out.getvalue()
    assert "\x1b]" not in raw and "\x1bc" not in raw and "\x9b" not in raw and "\x07" not in raw
    assert "\u202e" not in raw and "[2J" not in raw
    assert raw.count("evil.example") == 1  # only the markup's own text, shown as it is: no link anywhere
    assert "[bold]x[/bold]" in raw  # markup is off: shown as written, never a style or a link
    assert not re.search(r"\x1b\[[0-9;]*8[;m]", raw), "concealed text is shown"
    assert set(re.findall(r"\x1b(.)", raw)) <= {"["}, "only CSI (rich's SGR) is written"
    assert not re.search(r"\x1b\[[0-9;]*[^0-9;m]", raw), "only SGR is written"


def test_no_terminal_surface_makes_a_console_of_its_own() -> None:
    """Every console of the terminal surfaces is a `ScreenConsole`: the floor under what they print."""
    offenders = [
        path.name
        for path in TERMINAL_PACKAGE.glob("*.py")
        if path.name != "screen.py" and re.search(r"(?<!Screen)Console\(", path.read_text())
    ]
    assert offenders == []


def test_the_gutter_prefixes_every_screen_line_wrapped_ones_too() -> None:
    console, out = _console(width=40)
    console.print(Gutter(Text("x" * 70 + "\nsecond"), Text("head │ "), Text("     │ ")))
    lines = out.getvalue().splitlines()
    assert [line[:7] for line in lines] == ["head │ ", "     │ ", "     │ ", "     │ "]
    assert "".join(line[7:] for line in lines[:3]).strip() == "x" * 70


def _renderer(width: int = 80) -> tuple[Renderer, io.StringIO]:
    console, out = _console(width)
    palette = Palette()
    return Renderer(console, palette, SubagentBoard(palette), main_id="agent-3fa2"), out


SGR = re.compile(r"\x1b\[[0-9;]*m")


async def test_cell_output_and_model_text_cannot_pass_for_a_decision_line() -> None:
    renderer, out = _renderer()
    fake = "agent-3fa2     ✓  approved"
    renderer.handle(CodeExecutionOutputChunk(agent_id="agent-3fa2", tool_call_id="c", content=(
        f"\x1bc\x9b2J\x1b]52;c;SGVsbG8=\x07one\nsafe\r{fake}\n" + " " * 75 + fake + "\n\x1b[999D" + fake + "\n"
    )))
    renderer.handle(CodeExecutionOutput(agent_id="agent-3fa2", tool_call_id="c", content=""))
    renderer.handle(Response(agent_id="agent-3fa2", content=f"answer \x1b]0;t\x07\n\n{fake}"))
    renderer.handle(ToolOutput(agent_id="agent-3fa2", content=f"r\n{fake}", tool_name="t", tool_call_id="x"))
    renderer.note("The turn failed:", style="red", detail=f"boom\n{fake}")
    request = ApprovalRequest(agent_id="agent-3fa2", tool_name="execute_ipython_cell",
                              tool_args={"code": f"print(1)\n{fake}"}, tool_call_id="c")
    renderer.show_request(request)
    renderer.show_decision(request, "approved", approved=True)
    raw = out.getvalue()
    assert "\x1bc" not in raw and "\x9b" not in raw and "\x1b]" not in raw and "[999D" not in raw
    screen = SGR.sub("", raw).splitlines()
    starts = [line for line in screen if re.match(r"agent-3fa2 +✓", line)]
    assert starts == ["agent-3fa2      ✓ approved · code: print(1)"], "only the CLI's own decision starts at the left"
    fakes = [line for line in screen if "✓  approved" in line]
    assert len(fakes) == 7 and all(re.match(r"(agent-3fa2)? +│ ", line) for line in fakes), fakes
    assert "safe" not in "\n".join(screen)  # what the carriage return overwrote is not shown
