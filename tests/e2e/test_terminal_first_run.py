"""Issue 28's terminal items, run as the real command: other tools' agent files, warnings, output options."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from terminal_driver import Terminal, cli_env, processes_in

from tests.cli_fork import cli_command

pytestmark = pytest.mark.timeout(300)

CLAUDE_CODE_AGENT = """\
---
name: code-reviewer
description: Reviews code.
tools: Read, Grep, WebFetch
model: inherit
color: blue
skills: [pdf]
---
You review code.
"""


def _run(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_command(*args), cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)


def test_a_claude_code_agent_file_starts_with_each_warning_one_line(workdir: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    agents = home / ".config" / "freeact-sub" / "agents"
    agents.mkdir(parents=True)
    (agents / "code-reviewer.md").write_text(CLAUDE_CODE_AGENT)
    env = cli_env(HOME=str(home))
    done = _run("--demo", "-p", "one cell", "--auto-approve", cwd=workdir, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The sum of 1 to 100 is **5050**.\n"
    lines = [line for line in done.stderr.splitlines() if "warning" in line.lower()]
    assert lines == [
        f"freeact-sub: warning: {agents / 'code-reviewer.md'}: tools WebFetch: ignored (Claude Code's or OpenCode's "
        "own tools; here the kernel (execute_ipython_cell) reads, searches, runs and writes)",
        "freeact-sub: warning: agent type 'code-reviewer': skills: no skill 'pdf' here: left out (the skills: none)",
    ], done.stderr
    assert "warnings.warn" not in done.stderr and "UserWarning" not in done.stderr

    (agents / "code-reviewer.md").write_text(CLAUDE_CODE_AGENT.replace("Read, Grep", "execute_ipython_call"))
    done = _run("--demo", "-p", "one cell", "--auto-approve", cwd=workdir, env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines()[-1] == (
        f"freeact-sub: {agents / 'code-reviewer.md'}: agent type 'code-reviewer': tools: 'execute_ipython_call' "
        "names no tool (the built-in tools are execute_ipython_cell, reset_kernel, task, task_output, task_stop, "
        "task_list, task_send, task_report, load_skill; or <server>_<tool> of the MCP servers demo)")
    assert processes_in(workdir) == []


def test_a_timeline_file_that_cannot_be_written_is_refused_before_the_run(workdir: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing" / "dir" / "t.svg"
    done = _run("--demo", "-p", "one cell", "--auto-approve", "--timeline", str(missing), cwd=workdir, env=cli_env())
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"freeact-sub: --timeline {missing}: the folder {missing.parent} does not exist " \
                          "(checked before the run)\n"
    assert not (workdir / ".freeact-sub" / "sessions").exists()  # no run, no session
    done = _run("--demo", "-p", "one cell", "--auto-approve", "--timeline", str(tmp_path), cwd=workdir, env=cli_env())
    assert done.returncode == 2 and "name a .svg, .png or .html file" in done.stderr


def test_a_prompt_that_is_not_utf8_is_refused_before_anything_starts(workdir: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "freeact_sub.terminal.cli", "--demo", "--auto-approve", "-p",
                           b"hi \xff there"], cwd=workdir, env=cli_env(), stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr == (b"freeact-sub: -p: the prompt is not valid UTF-8 (a byte at character 4 is not); "
                           b"pass the text as UTF-8 (iconv -t UTF-8)\n")
    assert not (workdir / ".freeact-sub").exists()  # no session left behind


def test_a_working_folder_it_cannot_keep_files_in_is_one_line_and_exit_2(workdir: Path, tmp_path: Path) -> None:
    (workdir / ".freeact-sub").write_text("not a folder")
    config = tmp_path / "config.json"
    config.write_text('{"save_sessions": false}')
    done = _run("--demo", "-p", "one cell", "--auto-approve", "--config", str(config), cwd=workdir, env=cli_env())
    assert (done.returncode, done.stdout) == (2, "")
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        f"freeact-sub: working_dir: {workdir / '.freeact-sub'} cannot be made or written (it is not a folder)")
    assert processes_in(workdir) == []


def test_the_cli_asks_the_terminal_for_its_background_and_draws_for_a_light_one(workdir: Path) -> None:
    env = cli_env()
    env.pop("COLORFGBG")
    term = Terminal("--demo", cwd=workdir, env=env)
    try:
        deadline = time.monotonic() + 60
        while "\x1b]11;?" not in term.raw:  # the OSC 11 query: what is your background colour?
            assert time.monotonic() < deadline and not term.ended, term.text[-2000:]
            term._pump(0.1)
        term.send("\x1b]11;rgb:ffff/ffff/ffff\x1b\\")  # as a terminal with a white background answers
        term.expect_started()
        banner = term.raw[term.raw.index("\x1b]11;?"):]
        assert "38;5;26m" in banner  # the main agent's label in the light theme's first colour (dodger_blue3)
        assert "\x1b[1;96m" not in banner  # not bright cyan, faint on white
        term.send("\x04")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    assert processes_in(workdir) == []


def test_ctrl_c_while_a_slow_mcp_server_starts_stops_the_start_at_once(workdir: Path, tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(60)\n")  # an MCP server that never answers
    mcp = tmp_path / "mcp.json"
    server = {"command": sys.executable, "args": [str(tmp_path / "slow.py")]}
    mcp.write_text(json.dumps({"mcpServers": {"slow": server}}))
    term = Terminal("--demo", "--mcp-config", str(mcp), cwd=workdir)
    try:
        term.expect(r"starting the model, the kernel and MCP servers")  # the prompt is up while they start
        term.expect(r"you ›")
        deadline = time.monotonic() + 60
        while not any("slow.py" in line for line in processes_in(workdir)):
            assert time.monotonic() < deadline, "the slow server never started"
            term._pump(0.2)
        term.send("\x03")  # Ctrl-C at the empty prompt
        pressed = time.monotonic()
        term.expect(r"Cancelled: stopping what had started", timeout=5)
        assert term.wait_exit() == 130
        # the server still opening is stopped, not waited for (it was given 10 s to finish its handshake)
        assert time.monotonic() - pressed < 9
        assert "freeact-sub: cancelled while starting (Ctrl-C); nothing was left running" in term.text
        assert "Traceback" not in term.text
    finally:
        term.kill()
    assert processes_in(workdir) == []
