"""Issue 40's terminal items that are functions: `/agents` at 80 and 160 columns, decision lines that name their
call, the light theme's warnings, `--help`, a line typed during a turn, Claude Code's model aliases, a malformed
project skill, the trust question after a change, and the wording of `/skills`, `sessions show` and a missing folder."""

from __future__ import annotations

import io
import re
import warnings
from decimal import Decimal
from pathlib import Path
from typing import ClassVar

import pytest
from rich.console import Console
from rich.text import Text

from freeact_sub import ApprovalPolicy, ApprovalRequest, ConfigWarning, SubagentInfo
from freeact_sub.config.foreign_fields import translate_foreign_fields
from freeact_sub.config.prompt_files import load_prompt_files
from freeact_sub.config.type_files import project_agent_types
from freeact_sub.launch import UsageError, working_dir_from
from freeact_sub.terminal.approvals import ApprovalDesk
from freeact_sub.terminal.arguments import build_parser
from freeact_sub.terminal.palette import Palette
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.status import SubagentBoard, agents_table
from freeact_sub.terminal.theme import theme_for

SANDBOX = "workspace (writes: the working folder; network: api.example.com, pypi.org; 2 CPUs, 4 GB)"


def _info(agent_id: str, state: str, parent: str = "agent-main") -> SubagentInfo:
    return SubagentInfo(
        agent_id=agent_id,
        parent_id=parent,
        agent_type="reviewer",
        description="",
        prompt="p",
        state=state,
        background=False,
        turns=3,
        elapsed=12.0,
        input_tokens=1200,
        output_tokens=300,
        cost=Decimal("0.0123"),
        sandbox=SANDBOX,
    )


def _lines(renderable: object, width: int) -> list[str]:
    console = Console(file=io.StringIO(), width=width, record=True)
    console.print(renderable)
    return console.export_text().splitlines()


@pytest.mark.parametrize("width", [80, 160])
def test_agents_always_shows_the_state_and_cuts_no_word(width: int) -> None:
    agents = [_info("agent-1d74", "waiting for approval of code"), _info("agent-bbb5", "running code", "agent-1d74")]
    lines = _lines(agents_table(agents, Palette()), width)
    head = lines[0].split()
    assert all(len(line) <= width for line in lines), lines
    assert {"subagent", "state", "turns", "tokens", "cost"} <= set(head), head
    assert "waiting for approval of code" in lines[1] and "running code" in lines[2]
    if width == 160:
        assert "type" in head and "reviewer" in lines[1]
    sandbox = [line for line in lines[1:] if "workspace" in line]
    for line in sandbox:  # the sandbox is whole, or cut with an ellipsis at the end, never mid-word without one
        shown = line[line.index("workspace") :].rstrip()
        assert (SANDBOX.startswith(shown) and shown == SANDBOX) or shown.endswith("…"), shown


async def test_a_decision_line_names_the_call_it_answers() -> None:
    out = io.StringIO()
    palette = Palette()
    renderer = Renderer(Console(file=out, width=120), palette, SubagentBoard(palette), main_id="agent-main")
    cell = ApprovalRequest(
        agent_id="agent-main",
        tool_name="execute_ipython_cell",
        tool_call_id="c1",
        tool_args={"code": "\nprimes = [n for n in range(2, 1000) if all(n % d for d in range(2, n))]"},
    )
    tool = ApprovalRequest(agent_id="agent-main", tool_name="demo_constant", tool_call_id="c2", tool_args={})
    task = ApprovalRequest(
        agent_id="agent-main",
        tool_name="task",
        tool_call_id="c3",
        tool_args={"prompt": "Outline it", "subagent_type": "plan"},
    )
    renderer.show_decision(cell, "approved", approved=True)
    renderer.show_decision(tool, "rejected", approved=False)
    renderer.show_decision(task, "approved", approved=True)
    text = out.getvalue()
    assert "✓ approved · code: primes = [n for n in range(2, 1000) if al…" in text
    assert "✗ rejected · demo_constant" in text
    assert "✓ approved · subagent (plan): Outline it" in text


def test_the_light_theme_draws_no_warning_in_ansi_yellow() -> None:
    for background, yellow in (("light", False), ("dark", True)):
        console = Console(file=io.StringIO(), width=80, force_terminal=True, color_system="truecolor")
        theme_for(background).apply(console)  # type: ignore[arg-type]
        console.print(Text("cancelled", style="yellow"), Text.assemble(("rejected", "bold yellow")))
        codes = console.file.getvalue()  # type: ignore[attr-defined]
        assert bool(re.search(r"\x1b\[(?:1;)?(?:33|93)m", codes)) is yellow, (background, codes)


def test_help_lists_the_commands_and_what_trust_covers() -> None:
    text = " ".join(build_parser().format_help().split())
    for command in ("freeact-sub sessions", "freeact-sub trust", "freeact-sub acp"):
        assert command in text
    assert "AGENTS.md, its skills and its agent types" in text


async def test_a_line_typed_during_a_turn_reaches_the_session_and_is_never_an_answer() -> None:
    palette = Palette()
    renderer = Renderer(Console(file=io.StringIO(), width=120), palette, SubagentBoard(palette), main_id="m")
    desk = ApprovalDesk(renderer, palette, ApprovalPolicy())
    lines: list[str] = []
    desk.on_line = lines.append
    for key in "/agx\x7fents\r":
        assert desk.press(key) is False
    assert lines == ["/agents"]
    request = ApprovalRequest(agent_id="m", tool_name="execute_ipython_cell", tool_call_id="c", tool_args={})
    desk.submit(request)
    assert desk.press("y") and request.decision is True  # with a question open, keys answer it as before


def test_claude_codes_model_aliases_run_on_the_parents_model_with_a_warning() -> None:
    with pytest.warns(ConfigWarning, match=r"helper.md: model 'sonnet': ignored \(Claude Code's alias"):
        fields = translate_foreign_fields({"description": "d", "model": "sonnet"}, "helper.md")
    assert "model" not in fields
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "model" not in translate_foreign_fields({"description": "d", "model": "inherit"}, "x.md")
        assert translate_foreign_fields({"model": "openai:gpt-5"}, "x.md")["model"] == "openai:gpt-5"


def _skill(folder: Path, name: str, front: str) -> Path:
    path = folder / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\n{front}\n---\nbody\n", encoding="utf-8")
    return path


def test_a_malformed_project_skill_is_left_out_and_named_never_a_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    skills = work / ".agents" / "skills"
    _skill(skills, "good", "name: good\ndescription: Good.")
    bad = _skill(skills, "broken", "description: no name")
    project = project_agent_types(work)  # no ConfigError
    assert {file.name for file in project.powerful} == {"good", "broken"}  # both wait for trust
    untrusted = load_prompt_files(project, applied=False)
    assert not untrusted.skills and any(
        "broken/SKILL.md" in note and "not trusted" in note for note in untrusted.left_out
    )
    trusted = load_prompt_files(project, applied=True)
    assert list(trusted.skills) == ["good"]
    assert (
        f"{bad}: name: required, a non-empty string (the skill folder's name, 'broken') (this skill is left out)"
        in trusted.left_out
    )


def test_the_trust_question_names_what_changed_and_speaks_only_of_what_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    skills = work / ".agents" / "skills"
    _skill(skills, "one", "name: one\ndescription: One.")
    _skill(skills, "two", "name: two\ndescription: Two.")
    (work / "AGENTS.md").write_text("Be brief.\n")
    first = project_agent_types(work).question()
    assert "agent types" not in first and "instructions and skills" in first
    assert "AGENTS.md" in first and ".agents/skills/one/SKILL.md" in first
    project_agent_types(work).remember()
    (skills / "two" / "SKILL.md").write_text("---\nname: two\ndescription: Now it pushes to main.\n---\nbody\n")
    _skill(skills, "three", "name: three\ndescription: Three.")
    (skills / "one" / "SKILL.md").unlink()
    (skills / "one").rmdir()
    asked = project_agent_types(work).question()
    assert "changed: .agents/skills/two/SKILL.md: skill 'two' (its description in every agent's" in asked
    assert "new: .agents/skills/three/SKILL.md" in asked
    assert "removed: .agents/skills/one/SKILL.md" in asked
    assert "unchanged: AGENTS.md" in asked
    assert asked.count("SKILL.md") == 3  # not every file once more


def test_the_wording_of_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="there is no such folder"):
        working_dir_from(str(tmp_path / "nowhere"))
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="not a folder"):
        working_dir_from(str(tmp_path / "file"))


def test_sessions_show_of_a_child_labels_its_task_with_the_parent_not_you() -> None:
    from freeact_sub.sessions import UserPrompt
    from freeact_sub.sessions.index import SavedAgent
    from freeact_sub.terminal.sessions_cmd import print_transcript

    class Saved:
        session_id = "20261128-000000-abcd"
        agents: ClassVar[dict[str, SavedAgent]] = {
                  "agent-main": SavedAgent(agent_id="agent-main"),
                  "agent-1d74": SavedAgent(agent_id="agent-1d74", parent_id="agent-main", agent_type="general")}

        def events(self, agent_id: str) -> list[object]:
            return [UserPrompt(agent_id=agent_id, content=f"the prompt of {agent_id}")]

    for agent_id, label in (("agent-1d74", "agent-main  › the prompt of agent-1d74"),
                            ("agent-main", "you  › the prompt of agent-main")):
        out = io.StringIO()
        print_transcript(Console(file=out, width=120), Saved(), agent_id)  # type: ignore[arg-type]
        assert label in out.getvalue()
        assert agent_id == "agent-main" or "you" not in out.getvalue()


def test_skills_in_an_untrusted_folder_are_named_not_said_to_be_none(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from freeact_sub.terminal.skills_view import skills_view

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    _skill(work / ".agents" / "skills", "pdf-forms", "name: pdf-forms\ndescription: Fill PDF forms.")
    files = load_prompt_files(project_agent_types(work), applied=False)
    agent = SimpleNamespace(tree=SimpleNamespace(prompt_files=files, agent_types={}),
                            settings=SimpleNamespace(working_dir=work))
    text = " ".join(_lines(skills_view(agent), 200))  # type: ignore[arg-type]
    assert "No skills." not in text and "No skill is in use; these are left out:" in text
    assert ".agents/skills/pdf-forms/SKILL.md: not used (this folder is not trusted)" in text


def test_messages_break_between_words_at_80_columns_and_go_on_indented(monkeypatch: pytest.MonkeyPatch) -> None:
    from freeact_sub.terminal.output import wrapped
    from freeact_sub.terminal.warning_lines import warnings_as_lines

    said = ("agents/helper.md: permissionMode 'acceptEdits': ignored (only default, bypassPermissions and plan have a "
            "meaning here); tools execute_ipython_cell stays")
    console = Console(file=io.StringIO(), width=80, record=True, force_terminal=True)
    with warnings_as_lines(console):
        warnings.warn(said, ConfigWarning, stacklevel=1)
    lines = console.export_text().splitlines()
    assert len(lines) > 1 and all(len(line) <= 80 for line in lines)
    assert all(line.startswith(" " * len("freeact-sub: warning: ")) for line in lines[1:])
    assert " ".join(" ".join(lines).split()) == f"freeact-sub: warning: {said}"  # no word was cut
    piped = Console(file=io.StringIO(), width=80, record=True)  # a pipe or a log: one line, whatever its length
    with warnings_as_lines(piped):
        warnings.warn(said, ConfigWarning, stacklevel=1)
    assert piped.export_text().splitlines() == [f"freeact-sub: warning: {said}"]

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("COLUMNS", "80")
    text = wrapped(f"freeact-sub: {said}", Terminal())
    assert all(len(line) < 80 for line in text.splitlines()) and len(text.splitlines()) > 1
    assert all(line.startswith("  ") for line in text.splitlines()[1:])
    assert " ".join(text.split()) == f"freeact-sub: {said}"
    assert wrapped(said, io.StringIO()) == said  # not a terminal: one line, as it was
