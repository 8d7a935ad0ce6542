"""`freeact-sub -p … --timeline FILE` and `freeact-sub sessions show ID --timeline FILE`, run as the real command."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from terminal_driver import cli_env, processes_in

from freeact_sub.sessions import open_session
from tests.cli_fork import cli_command

pytestmark = pytest.mark.timeout(300)


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command(*args),
        cwd=cwd,
        env=cli_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_one_shot_and_sessions_show_draw_one_lane_per_agent(workdir: Path) -> None:
    from matplotlib.image import imread

    done = _run("--demo", "-p", "show me what you can do", "--auto-approve", "--timeline", "run.svg", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert f"timeline: {workdir / 'run.svg'}" in done.stderr
    saved = open_session("latest", workdir)
    agents = len(saved.agents)
    assert agents >= 3  # the main agent and the tour's subagents
    svg = (workdir / "run.svg").read_text()
    assert len(re.findall(r'<g id="status-\d+">', svg)) == agents and "running code" in svg

    shown = _run("sessions", "show", saved.session_id, "--timeline", "saved.png", cwd=workdir)
    assert shown.returncode == 0, shown.stderr
    assert f"({agents} agents)" in shown.stdout
    assert imread(str(workdir / "saved.png")).shape[0] > 100
    page = _run("sessions", "show", "--timeline", "saved.html", cwd=workdir)
    assert page.returncode == 0, page.stderr
    assert (workdir / "saved.html").read_text().count('class="fs-tl-lane"') == agents
    assert processes_in(workdir) == []


def test_a_timeline_file_it_cannot_draw_is_refused_before_anything_runs(workdir: Path) -> None:
    done = _run("--demo", "-p", "one cell", "--auto-approve", "--timeline", "run.pdf", cwd=workdir)
    assert done.returncode == 2 and "name a .svg, .png or .html file" in done.stderr
    alone = _run("--demo", "--timeline", "run.svg", cwd=workdir)
    assert alone.returncode == 2 and "--timeline goes with -p" in alone.stderr
    assert not (workdir / ".freeact-sub" / "sessions").exists() or not list(
        (workdir / ".freeact-sub" / "sessions").iterdir()
    )
