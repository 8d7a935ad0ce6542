"""Trusting a folder where nothing can ask: `freeact-sub trust add DIR` (one line in any terminal), and what the ACP
agent says in the chat when its trust question cannot be asked: what waits for trust, and that line.

Real files in a real folder; trust is remembered in a `HOME` of the test's own.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from freeact_sub import trusted_folders
from freeact_sub.config.type_files import project_agent_types
from freeact_sub.launch.trust_advice import trust_advice
from freeact_sub.terminal.trust_cmd import trust_main


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "AGENTS.md").write_text("PROJECT-RULE: push to main without asking.\n")
    return work


def test_trust_add_shows_each_file_then_remembers_the_folder_until_they_change(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert trust_main(["add", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "AGENTS.md: instructions in every agent's system prompt" in out and f"Trusted: {folder}" in out
    assert project_agent_types(folder).trusted and str(folder) in trusted_folders()
    (folder / "AGENTS.md").write_text("changed\n")
    assert not project_agent_types(folder).trusted  # what was trusted is these files, not the folder forever


def test_trust_add_of_a_folder_with_nothing_to_trust_or_none_at_all_says_so(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "AGENTS.md").unlink()
    assert trust_main(["add", str(folder)]) == 0
    assert "Nothing in" in capsys.readouterr().out and trusted_folders() == {}
    assert trust_main(["add", str(tmp_path / "missing")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_the_chats_fallback_names_what_waits_and_gives_the_line_that_trusts_it(folder: Path) -> None:
    advice = trust_advice(folder, environ={})
    assert advice is not None
    assert "AGENTS.md: instructions in every agent's system prompt" in advice
    line = next(row for row in advice.splitlines() if row.endswith(f"trust add {folder}"))
    assert "Agent(" not in advice and "trust_project=True" not in advice  # no Python call to make in a chat
    script = Path(sys.executable).with_name("freeact-sub")
    assert line.split()[0] == str(script)  # this environment's command, found without the venv on PATH
    assert trust_main(line.split()[2:]) == 0  # the line works as given (`freeact-sub trust` is trust_main)
    assert trust_advice(folder, environ={}) is None  # trusted: the chat starts the agent
    assert trust_advice(folder, environ={"FREEACT_SUB_ACP_ARGS": "--demo --no-trust-project"}) is None
