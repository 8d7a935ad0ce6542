"""Every Python example of the README and the documentation pages runs, against the offline demo model.

`tests/docs_examples.py` runs them all in one process with one demo server (see its docstring for how each
kind of example runs); this module starts it once and checks what each example printed. A new example in a
page runs without a change here; one that raises fails `test_every_example_runs`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# all examples run in one process, started by the first test that needs them: that test's setup takes the
# whole run (over a minute on a quiet machine, some minutes on a loaded one), so the module gets more time
pytestmark = pytest.mark.timeout(900)

STREAM_PROGRAM = "docs/program.md#0"
REJECTED = "docs/program.md#0 answered n"


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("docs-examples") / "results.json"
    extra = {STREAM_PROGRAM: [(REJECTED, ["n"])]}
    env = {**os.environ, "FREEACT_SUB_DEMO_CHUNK_DELAY": "0"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "docs_examples.py"), str(out), json.dumps(extra)],
        capture_output=True, text=True, timeout=840, env=env, cwd=out.parent,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return results


def output(ran: dict[str, Any], key: str) -> str:
    result = ran[key]
    assert result["error"] is None, f"{key} raised:\n{result['error']}\n{result['stdout'][-3000:]}"
    return str(result["stdout"])


def program_with(ran: dict[str, Any], text: str) -> str:
    (key,) = [k for k, r in ran.items() if r["kind"] == "program" and text in r["code"]]
    return key


def test_every_example_runs(ran: dict[str, Any]) -> None:
    failed = {key: result["error"] for key, result in ran.items() if result["error"]}
    assert not failed, "\n\n".join(f"{key}:\n{error}" for key, error in failed.items())
    kinds = [result["kind"] for result in ran.values()]
    assert kinds.count("program") >= 6 and kinds.count("fragment") >= 15, kinds  # nothing silently dropped
    assert "README.md#0" in ran  # the README's program is among them


def test_the_readmes_program_asks_runs_and_answers(ran: dict[str, Any]) -> None:
    out = output(ran, "README.md#0")
    assert re.search(r"\[agent-[0-9a-f]+\] run execute_ipython_cell\? \[y/n\] y", out), out
    assert "RESULT: 5050" in out and "The sum of 1 to 100 is **5050**." in out


def test_stream_example_runs_a_multi_step_task_with_approvals(ran: dict[str, Any]) -> None:
    out = output(ran, STREAM_PROGRAM)
    ids = set(re.findall(r"\[(agent-[0-9a-f]+)\]", out))
    assert len(ids) == 4, f"the main agent and three subagents should show up, saw {ids}\n{out}"
    assert out.count("wants to run:") >= 4  # main agent's two cells and one cell per computing subagent
    assert len(re.findall(r"calls demo_constant\(\{'name': '(?:pi|e)'\}\)", out)) >= 3  # from code and the π child
    assert re.search(r"\[agent-[0-9a-f]+\] calls demo_word_count", out)  # the reviewer, on the Anthropic protocol
    assert "RESULT:" in out  # the subagents' cells ran and printed
    assert "output:" in out


def test_stream_example_stops_when_the_user_says_no(ran: dict[str, Any]) -> None:
    out = output(ran, REJECTED)
    assert "rejected" in out
    assert "output:" not in out  # nothing ran


def test_subagent_example_reports_each_child(ran: dict[str, Any]) -> None:
    out = output(ran, program_with(ran, "SubagentStarted(subagent_id=child"))
    started = re.findall(r"started (agent-[0-9a-f]+)", out)
    finished = re.findall(r"(agent-[0-9a-f]+) done after \d+ turns", out)
    assert len(started) == 3 and sorted(started) == sorted(finished), out  # the demo's reviewer too


def test_sessions_example_resumes_and_reads_the_saved_session(ran: dict[str, Any]) -> None:
    out = output(ran, program_with(ran, "session=session_id"))
    listed = re.search(r"^(\d{8}-\d{6}-[0-9a-f]{4}) \S+ What is the sum of 1 to 100\? Use one cell\. (\d+)$",
                       out, flags=re.M)
    assert listed, out
    assert f"messages in session {listed.group(1)}" in out


def test_code_tools_example_asks_for_each_call_from_code(ran: dict[str, Any]) -> None:
    out = output(ran, program_with(ran, 'mcp_tools="code"'))
    for name in ("pi", "e", "phi"):
        assert re.search(rf"\[agent-[0-9a-f]+\] code in \S+ calls demo_constant\(\{{'name': '{name}'\}}\)", out), out
    assert "demo_constant -> 3.141592653589793" in out
    assert "the sentence has **13** words" in out
    (cell,) = [r["code"] for k, r in ran.items() if r["kind"] == "kernel cell" and k.startswith("docs/mcp.md#")]
    for line in cell.splitlines():  # the page's "cell the model writes" is the cell that ran
        if line.strip() and not line.startswith("#"):
            assert line in out, line


def test_subagents_from_code_example_asks_once_for_a_batch_and_reads_objects(ran: dict[str, Any]) -> None:
    from freeact_sub.demo.main_scripts import ROWS_CELL

    out = output(ran, program_with(ran, 'tool_args={"count": count}'))
    assert re.search(r"\[agent-[0-9a-f]+\] a batch of 4 subagents: Count the letters of the word \{word!r\}\.", out)
    assert re.search(r"^batch of 4: 4 done, 0 failed, [1-9]\d* tokens$", out, flags=re.M), out  # `BatchTracker`
    assert "4 subagents, one per row, counted: **kernel** 6, **subagent** 8, **approval** 8, **sandbox** 7." in out
    (cell,) = [r["code"] for k, r in ran.items() if r["kind"] == "kernel cell" and k.startswith("docs/subagents-")]
    assert cell.strip() == ROWS_CELL.strip() and ROWS_CELL in out  # the page shows the cell that ran


def test_directed_turn_and_command_example_runs_the_persons_own_subagents(ran: dict[str, Any]) -> None:
    out = output(ran, program_with(ran, "stream_command"))
    assert "the subagent's answer: There are 17984 primes below 200,000." in out, out
    assert "{'primes': 'Count primes'}" in out
    assert "the command's answer: There are 17984 primes below 200,000." in out, out


def test_fragments_print_what_they_promise(ran: dict[str, Any]) -> None:
    by_code = {r["code"]: r for r in ran.values()}
    timeline = next(r for code, r in by_code.items() if "picture = timeline(events)" in code)
    assert re.search(r"^agent-[0-9a-f]+ None done$", timeline["stdout"], flags=re.M), timeline["stdout"]
    assert "running_code" in timeline["stdout"] or "running code" in timeline["stdout"]
    usage = next(r for code, r in by_code.items() if "usage = agent.usage" in code)
    assert re.search(r"^agent-[0-9a-f]+ \d+ \d+ None$", usage["stdout"], flags=re.M), usage["stdout"]


def test_the_skills_example_shows_names_and_descriptions_but_not_the_body(ran: dict[str, Any]) -> None:
    skills = next(r for r in ran.values() if "release-project" in r["code"])
    out = skills["stdout"]
    assert out.startswith("## Instructions") and "Run the tests with `pytest -q`" in out, out
    assert "- release-notes: Write release notes from the git log since the last tag." in out, out
    assert "git describe" not in out  # the body waits for `load_skill`
def test_compaction_example_compacts_and_goes_on(ran: dict[str, Any]) -> None:
    out = output(ran, program_with(ran, "await agent.compact(focus="))
    assert re.search(r"^[\d,]+ → [\d,]+ tokens$", out, flags=re.M), out
    assert "The person asked: Run one cell, please. Tool calls so far: 1." in out
    assert re.search(r"^\d+ messages in the history$", out, flags=re.M), out
