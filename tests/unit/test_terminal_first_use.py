"""Issue 28's terminal items that are functions: type colours, warning lines, answer keys."""

from __future__ import annotations

import io
import re
import time
import warnings
from pathlib import Path

import pytest
from rich.console import Console

from freeact_sub import Agent, AgentConfig, ApprovalRequest, ConfigError, ConfigWarning
from freeact_sub.config.agent_types import load_agent_types
from freeact_sub.sessions import SavedDecision, SessionStore, UserPrompt
from freeact_sub.terminal.input_text import first_undecodable, replace_undecodable
from freeact_sub.terminal.palette import Palette, type_colour
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.session import Session
from freeact_sub.terminal.sessions_cmd import print_transcript
from freeact_sub.terminal.status import SubagentBoard
from freeact_sub.terminal.theme import (
    choose_background,
    from_colorfgbg,
    parse_background_reply,
    query_background,
    theme_for,
)
from freeact_sub.terminal.warning_lines import warnings_as_lines


def strip_control(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_an_agent_types_own_colour_draws_its_agents_and_odd_names_fall_back_to_the_palette() -> None:
    palette = Palette({"reviewer": "blue", "builder": "orange", "odd": "nonsense", "plain": None})
    main = palette.colour("agent-main")
    palette.set_type("agent-a", "reviewer")
    palette.set_type("agent-b", "builder")
    palette.set_type("agent-c", "odd")
    assert palette.colour("agent-a") == "blue" and palette.colour("agent-b") == "orange1"
    assert palette.colour("agent-c") not in ("blue", "orange1", main)  # the palette's next colour
    assert type_colour("#5F87FF") == "#5f87ff" and type_colour("nonsense") is None and type_colour(None) is None


def test_one_bad_command_file_leaves_the_others_working_and_help_names_every_bad_file(tmp_path: Path) -> None:
    folder = tmp_path / ".freeact-sub" / "commands"
    folder.mkdir(parents=True)
    (folder / "x.md").write_text("Say x.\n")
    (folder / "bad1.md").write_text("---\ndescripton: typo\n---\nbody\n")
    (folder / "bad2.md").write_text("---\nmodel: [1]\n---\nbody\n")
    out = io.StringIO()
    agent = Agent(AgentConfig(model="test", working_dir=tmp_path))
    session = Session(agent, Console(file=out, width=200), ask_keys=False)
    assert session.command("/x") is False  # run as a turn
    assert agent.read_prompt("/x now") == ("Say x.\n\nnow", None, None)
    assert session.command("/bad1") is False  # run_turn says what is wrong with its file
    with pytest.raises(ConfigError, match=r"bad1\.md: descripton: unknown field"):
        agent.read_prompt("/bad1")
    assert session.command("/help") is True
    text = out.getvalue()
    assert "/x: (no description)" in text and "bad1.md: descripton: unknown field" in text
    assert "bad2.md: model: Input should be a valid string" in text


def test_a_warning_is_one_styled_line_said_once_without_a_source_line() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=True)
    with warnings_as_lines(console):
        for _ in range(2):
            warnings.warn("x.md: skills: ignored\n(no skills)\x1b[2J", ConfigWarning, stacklevel=1)
        warnings.warn("another", UserWarning, stacklevel=1)
    text = strip_control(out.getvalue())
    assert text.splitlines() == ["freeact-sub: warning: x.md: skills: ignored (no skills)",
                                 "freeact-sub: warning: another"]
    assert "\x1b[33m" in out.getvalue()  # yellow


async def test_an_unknown_tool_name_is_an_error_at_load_naming_the_file_and_the_field(tmp_path: Path) -> None:
    folder = tmp_path / ".freeact-sub" / "agents"
    folder.mkdir(parents=True)
    (folder / "runner.md").write_text("---\ndescription: runs\ntools: [execute_ipython_call]\n---\nRun.\n")
    with pytest.raises(ConfigError, match=r"runner\.md: agent type 'runner': tools: 'execute_ipython_call' names no "
                                          r"tool \(the built-in tools are execute_ipython_cell, "):
        load_agent_types({}, tmp_path, user_dir=tmp_path / "none", servers=["demo"])
    (folder / "runner.md").write_text("---\ndescription: runs\ntools: [execute_ipython_cell, demo_*, files_read]\n"
                                      "mcpServers: {files: {command: x}}\ndisallowedTools: [reset_kernel]\n---\nRun.\n")
    # (its own MCP server is a power: trusted here, for the tool names are what this test is about)
    assert load_agent_types({}, tmp_path, user_dir=tmp_path / "none", servers=["demo"],
                            trust_project=True)["runner"].tools
    with pytest.raises(ConfigError, match=r"agents\.x: disallowed_tools: 'calcecho' names no tool .* of the MCP "
                                          r"servers demo, files"):
        load_agent_types({"x": {"description": "x", "disallowed_tools": ["calcecho"]}}, tmp_path,
                         user_dir=tmp_path / "none", servers=["demo"], trust_project=True)
    with pytest.raises(ConfigError, match=r"config: tools: 'execute_ipython_call' names no tool"):
        await Agent(AgentConfig(model="test", working_dir=tmp_path, tools=["execute_ipython_call"])).start()


async def test_bytes_that_were_not_utf8_are_replaced_in_typed_text_and_a_session_never_used_is_not_kept(
    tmp_path: Path,
) -> None:
    assert first_undecodable("ok") is None and first_undecodable("hi \udcff") == 3
    assert replace_undecodable("hi \udcff there") == "hi \ufffd there"
    assert replace_undecodable("caf\udcc3\udca9") == "café"  # escaped UTF-8 bytes decode again
    assert replace_undecodable("a \ud800") == "a \ufffd"  # a surrogate that stands for no byte
    with pytest.raises(ValueError, match="character 4 is a lone surrogate"):
        await Agent(AgentConfig(model="test", working_dir=tmp_path)).stream("hi \udcff").__anext__()
    store = SessionStore.create(tmp_path)
    with pytest.raises(UnicodeEncodeError):
        store.record({"record": "prompt", "text": "hi \udcff"}, used=True)
    store.close()
    assert not any((tmp_path / ".freeact-sub" / "sessions").glob("*/index.jsonl"))  # nothing to resume: removed


async def test_a_typed_line_with_such_bytes_is_read_with_a_note(tmp_path: Path) -> None:
    out = io.StringIO()
    session = Session(Agent(AgentConfig(model="test", working_dir=tmp_path)), Console(file=out, width=200),
                      ask_keys=False)
    lines = iter(["/help \udcff"])

    class Reader:
        async def read(self) -> str:
            try:
                return next(lines)
            except StopIteration:
                raise EOFError from None

    await session._prompts(Reader(), None)  # type: ignore[arg-type]
    assert "Your text held bytes that are not UTF-8; they are sent as �." in out.getvalue()
    assert "Commands:" in out.getvalue()


async def test_a_working_folder_where_freeact_sub_cannot_keep_files_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / ".freeact-sub").write_text("not a folder")
    config = AgentConfig(model="test", working_dir=tmp_path, save_sessions=False)
    with pytest.raises(ConfigError) as caught:
        await Agent(config).start()
    assert str(caught.value).startswith(
        f"working_dir: {tmp_path / '.freeact-sub'} cannot be made or written (it is not a folder); it holds the "
        "images cells make (images_dir).")
    # nothing of this config keeps files there: no error, nothing made
    AgentConfig(model="test", working_dir=tmp_path, save_sessions=False, images_dir=tmp_path / "img").make_state_dir()


async def test_sessions_show_says_which_questions_were_still_open_when_the_session_ended() -> None:
    out = io.StringIO()
    request = ApprovalRequest(agent_id="agent-main", tool_name="execute_ipython_cell", tool_args={"code": "1 + 1"},
                              tool_call_id="c1")
    events = [UserPrompt(agent_id="agent-main", content="add"), request,
              SavedDecision(agent_id="agent-main", tool_call_id="c1", by="pending")]

    class Saved:
        session_id = "20261127-000000-abcd"

        def events(self, agent_id: str) -> list[object]:
            return events

    print_transcript(Console(file=out, width=200), Saved(), "agent-main")  # type: ignore[arg-type]
    text = out.getvalue()
    assert "✗ never answered: the session ended while this question waited (it did not run)" in text
    assert "1 question was still waiting for an answer when the session ended" in text


def test_subagents_alive_from_earlier_turns_are_rows_beside_a_queued_one() -> None:
    from decimal import Decimal

    from freeact_sub import SubagentInfo
    from freeact_sub.terminal.status import SubagentBoard

    def info(agent_id: str, state: str) -> SubagentInfo:
        return SubagentInfo(agent_id=agent_id, parent_id="agent-main", agent_type="general", description="",
                            prompt="p", state=state, background=True, turns=2, elapsed=5.0, input_tokens=100,
                            output_tokens=20, cost=Decimal("0.001"))

    board = SubagentBoard(Palette())
    board.carry_over([info("agent-bg01", "running"), info("agent-bg02", "waiting")])
    board.queued("agent-new1", parent_id="agent-main")
    out = io.StringIO()
    Console(file=out, width=120).print(board.render())
    rows = {line.split()[0]: line for line in out.getvalue().splitlines()[1:]}
    assert "running (background)" in rows["agent-bg01"] and "120" in rows["agent-bg01"]
    assert "2/" not in rows["agent-bg01"]  # its turn limit is not known here: no `2/0`
    assert "waiting for a slot" in rows["agent-bg02"] and "waiting for a slot" in rows["agent-new1"]


def test_the_background_comes_from_the_flag_the_environment_or_colorfgbg() -> None:
    assert from_colorfgbg("0;15") == "light" and from_colorfgbg("15;0") == "dark"
    assert from_colorfgbg("0;default;7") == "light" and from_colorfgbg("") is None and from_colorfgbg("x") is None
    assert parse_background_reply(b"\x1b]11;rgb:ffff/ffff/ffff\x1b\\") == "light"
    assert parse_background_reply(b"\x1b]11;rgb:1c1c/1c1c/1c1c\x07") == "dark"
    assert parse_background_reply(b"junk") is None
    assert choose_background("light", {"FREEACT_SUB_THEME": "dark", "COLORFGBG": "15;0"}) == "light"
    assert choose_background(None, {"FREEACT_SUB_THEME": "dark", "COLORFGBG": "0;15"}) == "dark"
    assert choose_background(None, {"COLORFGBG": "0;15"}) == "light" and choose_background(None, {}) == "dark"
    with pytest.raises(ValueError, match="FREEACT_SUB_THEME sepia: use light or dark"):
        choose_background(None, {"FREEACT_SUB_THEME": "sepia"})


def test_the_terminal_is_asked_for_its_background_and_silence_is_no_answer() -> None:
    import os
    import threading

    master, slave = os.openpty()
    try:
        def answer() -> None:
            asked = b""
            while b"\x1b]11;?" not in asked:
                asked += os.read(master, 64)
            os.write(master, b"\x1b]11;rgb:fafa/fafa/f0f0\x1b\\")

        helper = threading.Thread(target=answer)
        helper.start()
        assert choose_background(None, {}, tty_fds=(slave, slave)) == "light"
        helper.join(timeout=5)
        started = time.monotonic()
        assert query_background(slave, slave, timeout=0.1) is None  # nobody answers: no theme from it
        assert time.monotonic() - started < 1
    finally:
        os.close(master)
        os.close(slave)


async def test_code_to_approve_and_agent_labels_are_readable_on_a_light_background() -> None:
    def drawn(theme: str) -> str:
        out = io.StringIO()
        palette = Palette({"scout": "yellow"}, theme_for(theme))  # type: ignore[arg-type]
        console = Console(file=out, width=100, force_terminal=True, color_system="truecolor")
        renderer = Renderer(console, palette, SubagentBoard(palette), main_id="agent-main")
        palette.set_type("agent-s", "scout")
        renderer.show_request(ApprovalRequest(agent_id="agent-s", tool_name="execute_ipython_cell",
                                              tool_args={"code": "limit = 200_000\nprint(limit)"}, tool_call_id="c"))
        return out.getvalue()

    near_white = "38;2;248;248;242"  # monokai's identifiers
    assert near_white in drawn("dark") and near_white not in drawn("light")
    light = Palette({"scout": "yellow"}, theme_for("light"))
    light.set_type("agent-s", "scout")
    assert light.colour("agent-s") == "dark_goldenrod"
    assert not any(light.colour(f"agent-{n}").startswith("bright") for n in range(12))


async def test_questions_fit_80_columns_one_line_each() -> None:
    from freeact_sub import ApprovalPolicy
    from freeact_sub.terminal.approvals import ApprovalDesk

    palette = Palette()
    renderer = Renderer(Console(file=io.StringIO(), width=80), palette, SubagentBoard(palette), main_id="agent-main")
    desk = ApprovalDesk(renderer, palette, ApprovalPolicy(), stop=lambda agent_id: True)
    palette.set_type("agent-bbb5", "reviewer")
    requests = [
        ApprovalRequest(agent_id="agent-bbb5", tool_name="execute_ipython_cell", tool_call_id="1",
                        tool_args={"code": "limit = 200_000; primes = [n for n in range(2, limit) if all("
                                           "n % d for d in range(2, int(n ** 0.5) + 1))]"}),
        ApprovalRequest(agent_id="agent-1d74", tool_name="demo_constant", tool_args={"name": "pi" * 40},
                        tool_call_id="2"),
    ]

    def lines() -> list[str]:
        console = Console(width=80, record=True, file=io.StringIO())
        console.print(desk.view())
        return console.export_text().splitlines()

    desk.submit(requests[0])
    assert len(lines()) == 1 and "[y]es" in lines()[0] and "[s]top" in lines()[0]
    desk.submit(requests[1])
    shown = lines()
    assert len(shown) == 3 and all(len(line) <= 80 for line in shown), shown
    for key in ("n", "\x1b", "A"):  # the reason line, back, the confirmation
        desk.press(key)
        shown = lines()
        assert len(shown) == 3 and all(len(line) <= 80 for line in shown), shown
    assert "Every agent, from now on?" in shown[1]


def test_inline_code_and_code_blocks_in_answers_are_no_black_boxes_on_a_light_background(tmp_path: Path) -> None:
    from freeact_sub import Response

    shown = {}
    for background in ("light", "dark"):
        out = io.StringIO()
        console = Console(file=out, width=80, force_terminal=True, color_system="256")
        session = Session(Agent(AgentConfig(model="test", working_dir=tmp_path)), console, ask_keys=False,
                          theme=theme_for(background))
        session.renderer.handle(Response(agent_id=session.agent.agent_id, final=False,
                                         content="call `constant` now\n\n```python\nx = 1\n```"))
        shown[background] = out.getvalue()
    assert "\x1b[1;36;40mconstant" in shown["dark"]  # rich's own: cyan on black, fine on a dark terminal
    assert ";40m" not in shown["light"] and "48;5;235" not in shown["light"]  # no black, no monokai box on white
    assert "48;5;255mconstant" in shown["light"]  # a pale grey box instead
    assert theme_for("light").prompt_style == "bold ansiblue" and "bright" in theme_for("dark").prompt_style
