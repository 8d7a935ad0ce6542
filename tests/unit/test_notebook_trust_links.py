"""The trust panel links each file it asks about (issue 40, item 35): in JupyterLab an output's relative link opens
the file in a tab, so the person reads `AGENTS.md` or a skill before trusting it."""

from __future__ import annotations

from pathlib import Path

import pytest

from freeact_sub.config.project_trust import ProjectFile, ProjectPowers
from freeact_sub.notebook.trust_panel import TrustPanel


def test_each_file_of_the_question_is_a_relative_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    skill = work / ".agents" / "skills" / "pdf notes" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    (work / "AGENTS.md").write_text("rules\n")
    skill.write_text("---\nname: pdf\n---\n")
    files = (
        ProjectFile(
            path=work / "AGENTS.md", text="rules\n", name="AGENTS.md", powers=("instructions",), kind="instructions"
        ),
        ProjectFile(path=skill, text="---\nname: pdf\n---\n", name="pdf", powers=("skill",), kind="skill"),
    )
    project = ProjectPowers(folder=work, files=files, store=tmp_path / "trusted.json")
    monkeypatch.chdir(tmp_path)  # the notebook sits one folder above the agent's working folder
    panel = TrustPanel(project, on_decision=lambda _: None)
    (output,) = panel.files.outputs
    shown = output["data"]["text/html"]
    assert '<a href="work/AGENTS.md"' in shown
    assert '<a href="work/.agents/skills/pdf%20notes/SKILL.md"' in shown  # quoted: a space is part of the name
    assert panel.files in panel.children and "freeact-trust-files" in panel.files._dom_classes
