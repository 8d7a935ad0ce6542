"""One-shot mode (`freeact-sub -p`) and configuration errors, run as the real command."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from terminal_driver import AGENT, Terminal, cli_env, processes_in, strip_control

from tests.cli_fork import cli_command

pytestmark = pytest.mark.timeout(300)


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command without a terminal: stdin, stdout and stderr are not ttys."""
    return subprocess.run(
        cli_command(*args),
        cwd=cwd,
        env=env or cli_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.parametrize("opt_in", ["flag", "environment"])
def test_one_shot_prints_the_final_answer_on_stdout(workdir: Path, opt_in: str) -> None:
    if opt_in == "flag":
        done = _run("--demo", "-p", "one cell", "--auto-approve", cwd=workdir)
    else:
        done = _run("--demo", "-p", "one cell", cwd=workdir, env=cli_env(FREEACT_SUB_AUTO_APPROVE="1"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The sum of 1 to 100 is **5050**.\n"
    assert "AUTO-APPROVE" in done.stderr  # the opt-in is announced
    assert "execute_ipython_cell  auto-approved" in done.stderr  # and auto-approved code is still shown
    # the tree's usage at the end: the demo server reports tokens; a local server has no price
    assert re.search(r"usage: 2 model requests, [\d,]+ input \+ [\d,]+ output tokens, cost unknown", done.stderr)
    assert processes_in(workdir) == []


def test_one_shot_without_a_terminal_refuses_to_wait_for_approvals(workdir: Path) -> None:
    done = _run("--demo", "-p", "one cell", cwd=workdir)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "--auto-approve" in done.stderr and "approvals" in done.stderr


def test_one_shot_exits_non_zero_when_the_model_fails(workdir: Path) -> None:
    done = _run("--demo", "-p", "please cause a model error", "--auto-approve", cwd=workdir)
    assert done.returncode == 1
    assert "asked to fail" in done.stderr and done.stdout == ""
    assert processes_in(workdir) == []


# "n" then Enter: a rejection without a reason, which ends the turn
@pytest.mark.parametrize(("key", "code", "answer"), [("y", 0, "5050"), ("n\r", 1, "rejected")])
def test_one_shot_in_a_terminal_asks_and_reports_the_outcome(workdir: Path, key: str, code: int, answer: str) -> None:
    term = Terminal("--demo", "-p", "one cell", cwd=workdir)
    try:
        main = term.expect(rf"({AGENT}) \(main\)").group(1)
        term.expect(rf"\[{main}\] Run this code\?")
        term.send(key)
        term.expect(answer)
        assert term.wait_exit() == code
    finally:
        term.kill()
    assert processes_in(workdir) == []


def _error(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = _run(*args, cwd=cwd, env=env)
    assert done.returncode != 0 and done.stdout == ""
    message = strip_control(done.stderr).strip()
    assert message.startswith("freeact-sub: "), message
    assert "Traceback" not in message
    return message


def test_configuration_errors_give_one_clear_message(workdir: Path, tmp_path: Path) -> None:
    message = _error("-p", "hi", "--model", "openai:gpt-4.1", "--auto-approve", cwd=workdir)
    assert "OPENAI_API_KEY" in message and "\n" not in message
    message = _error("-p", "hi", "--model", "nonsense:model", "--auto-approve", cwd=workdir)
    assert "Unknown model" in message and "nonsense:model" in message
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    message = _error("-p", "hi", "--config", str(broken), "--auto-approve", cwd=workdir)
    assert str(broken) in message and "not valid JSON" in message
    wrong = tmp_path / "wrong.toml"
    wrong.write_text("max_subagents = 0\n")
    message = _error("-p", "hi", "--config", str(wrong), "--auto-approve", cwd=workdir)
    assert "max_subagents" in message
    message = _error("-p", "hi", "--mcp-config", str(tmp_path / "missing.json"), "--auto-approve", cwd=workdir)
    assert "missing.json" in message and "not found" in message
    env = cli_env()
    message = _error(
        "-p", "hi", "--model", "llama3", "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "NO_SUCH_KEY",
        "--auto-approve", cwd=workdir, env=env,
    )  # fmt: skip
    assert "NO_SUCH_KEY" in message
    message = _error(cwd=workdir)  # interactive mode without a terminal
    assert "needs a terminal" in message
    assert processes_in(workdir) == []


def test_a_failing_mcp_server_is_named_and_nothing_is_left_running(workdir: Path, tmp_path: Path) -> None:
    servers = {"mcpServers": {"broken": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}}}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps(servers))
    done = _run("--demo", "-p", "one cell", "--auto-approve", "--mcp-config", str(config), cwd=workdir)
    assert done.returncode == 1
    message = strip_control(done.stderr).strip().splitlines()[-1]
    assert message.startswith("freeact-sub: MCP server 'broken'")
    assert processes_in(workdir) == []  # the kernel that started alongside was shut down


@pytest.mark.parametrize(
    ("setup", "args", "says"),
    [
        ("bad-type-file", [], "broken.md"),
        ("none", ["--agent", "nosuch"], "unknown agent type 'nosuch'"),
        ("missing-server-command", [], "mcp_servers.gone.command"),
    ],
)
def test_a_configuration_error_found_at_start_exits_2_before_any_kernel_starts(
    workdir: Path, setup: str, args: list[str], says: str
) -> None:
    if setup == "bad-type-file":
        folder = workdir / ".freeact-sub" / "agents"
        folder.mkdir(parents=True)
        (folder / "broken.md").write_text("---\ndescription: x\nmaxTurns: lots\n---\n", encoding="utf-8")
    if setup == "missing-server-command":
        (workdir / "mcp.json").write_text('{"mcpServers": {"gone": {"command": "no-such-mcp-server-binary"}}}')
        args = ["--mcp-config", "mcp.json"]
    done = _run("--demo", "-p", "one cell", "--auto-approve", *args, cwd=workdir)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and done.stdout == ""
    assert "Traceback" not in done.stderr
    assert processes_in(workdir) == []


def test_one_shot_at_type_prints_the_subagents_answer(workdir: Path) -> None:
    done = _run("--demo", "-p", "@general count the primes", "--auto-approve", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "There are 17984 primes below 200,000.\n"
    assert re.search(rf"{AGENT} +\+ started {AGENT} +count the primes", strip_control(done.stderr))
    assert processes_in(workdir) == []
