"""Issue 28's terminal items that are functions: type colours, warning lines, answer keys."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from freeact_sub import Agent, AgentConfig, ConfigError
from freeact_sub.terminal.palette import Palette, type_colour
from freeact_sub.terminal.session import Session


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
