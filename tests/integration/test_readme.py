"""The README's Python programs run as a newcomer would run them, against the offline demo model.

Only the model line changes: the README's provider string becomes the scripted demo server
(a real OpenAI-compatible HTTP server on 127.0.0.1), so the programs exercise the same code
path a real provider does.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"

PRELUDE = """\
from freeact_sub.demo import demo_config, start_demo_server
_server = start_demo_server()
"""


def readme_programs() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    return [block for block in blocks if "asyncio.run(main())" in block]


def on_demo_model(program: str, workdir: Path) -> str:
    replaced, count = re.subn(
        r"AgentConfig\(model=\"[^\"]+\"(, )?",
        lambda m: f"demo_config(_server, working_dir={str(workdir)!r}" + (", " if m.group(1) else ""),
        program,
    )
    assert count == 1, "each README program should build exactly one AgentConfig"
    return PRELUDE + replaced


def run(program: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", program], input=stdin, capture_output=True, text=True, timeout=180
    )


def test_readme_has_the_programs_this_test_runs() -> None:
    assert len(readme_programs()) == 5


def test_stream_example_runs_a_multi_step_task_with_approvals(workdir: Path) -> None:
    program = on_demo_model(readme_programs()[0], workdir)
    done = run(program, stdin="y\n" * 20)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    ids = set(re.findall(r"\[(agent-[0-9a-f]+)\]", out))
    assert len(ids) == 4, f"the main agent and three subagents should show up, saw {ids}\n{out}"
    assert out.count("wants to run:") >= 4  # main agent's two cells and one cell per computing subagent
    assert len(re.findall(r"calls demo_constant\(\{'name': '(?:pi|e)'\}\)", out)) >= 3  # from code and the π child
    assert re.search(r"\[agent-[0-9a-f]+\] calls demo_word_count", out)  # the reviewer, on the Anthropic protocol
    assert "RESULT:" in out  # the subagents' cells ran and printed
    assert "output:" in out


def test_stream_example_stops_when_the_user_says_no(workdir: Path) -> None:
    program = on_demo_model(readme_programs()[0], workdir)
    done = run(program, stdin="n\n")
    assert done.returncode == 0, done.stderr
    assert "rejected" in done.stdout
    assert "output:" not in done.stdout  # nothing ran


@pytest.mark.parametrize("index", [1])
def test_subagent_example_reports_each_child(workdir: Path, index: int) -> None:
    done = run(on_demo_model(readme_programs()[index], workdir), stdin="")
    assert done.returncode == 0, done.stderr
    started = re.findall(r"started (agent-[0-9a-f]+)", done.stdout)
    finished = re.findall(r"(agent-[0-9a-f]+) done after \d+ turns", done.stdout)
    assert len(started) == 3 and sorted(started) == sorted(finished), done.stdout  # the demo's reviewer too


def test_sessions_example_resumes_and_reads_the_saved_session(workdir: Path) -> None:
    program = next(p for p in readme_programs() if "session=session_id" in p)
    done = run(on_demo_model(program, workdir), stdin="")
    assert done.returncode == 0, done.stderr
    listed = re.search(r"^(\d{8}-\d{6}-[0-9a-f]{4}) \S+ What is the sum of 1 to 100\? Use one cell\. (\d+)$",
                       done.stdout, flags=re.M)
    assert listed, done.stdout
    assert f"messages in session {listed.group(1)}" in done.stdout


def test_code_tools_example_asks_for_each_call_from_code(workdir: Path) -> None:
    program = next(p for p in readme_programs() if "mcp_tools=\"code\"" in p)
    done = run(on_demo_model(program, workdir), stdin="y\n" * 10)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for name in ("pi", "e", "phi"):
        assert re.search(rf"\[agent-[0-9a-f]+\] code in \S+ calls demo_constant\(\{{'name': '{name}'\}}\)", out), out
    assert "demo_constant -> 3.141592653589793" in out
    assert "the sentence has **13** words" in out


def test_directed_turn_and_command_example_runs_the_persons_own_subagents(workdir: Path) -> None:
    program = next(p for p in readme_programs() if "stream_command" in p)
    done = run(on_demo_model(program, workdir), stdin="")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "the subagent's answer: There are 17984 primes below 200,000." in out, out
    assert "{'primes': 'Count primes'}" in out
    assert "the command's answer: There are 17984 primes below 200,000." in out, out
