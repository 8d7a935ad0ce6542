"""`freeact-sub` killed with SIGKILL mid-round, then resumed: files load, histories are valid, no round is lost.

The command runs for real (`--demo`: the scripted OpenAI-compatible server, real kernels, the
demo MCP server) in one-shot mode. The test watches the session's files to kill it at a
chosen point: while the model streams, while a cell runs, while subagents run. Then
`--resume` continues the session and `freeact-sub sessions` / `sessions show` read it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, ToolReturnPart, UserPromptPart

from freeact_sub.sessions import INTERRUPTED_RESULT, RESUME_NOTE, SavedSession, list_sessions, open_session
from tests.cli_fork import cli_command
from tests.e2e.terminal_driver import cli_env

RUN_LIMIT = 120.0


def cli(workdir: Path, *args: str, chunk_delay: float = 0.0) -> subprocess.Popen[str]:
    env = cli_env(FREEACT_SUB_DEMO_CHUNK_DELAY=str(chunk_delay))
    return subprocess.Popen(
        cli_command("--demo", "--auto-approve", *args),
        cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_for(condition: Callable[[], bool], what: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + RUN_LIMIT
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"the command ended before {what}: {process.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def session(workdir: Path) -> SavedSession | None:
    found = list_sessions(workdir)
    return found[0] if found else None


def transcript(workdir: Path, agent_id: str | None = None) -> bytes:
    saved = session(workdir)
    if saved is None or saved.summary.main_id is None:
        return b""
    path = saved.path / f"{agent_id or saved.main_id}.jsonl"
    return path.read_bytes() if path.exists() else b""


def kill(process: subprocess.Popen[str]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)


def assert_valid(messages: list[ModelMessage]) -> None:
    """Every tool call has its result in the request that follows it."""
    for index, message in enumerate(messages):
        calls = {p.tool_call_id for p in message.parts if p.part_kind == "tool-call"}
        if not calls:
            continue
        assert index + 1 < len(messages), "a call without a result at the end"
        following = messages[index + 1]
        assert isinstance(following, ModelRequest)
        assert calls <= {p.tool_call_id for p in following.parts if isinstance(p, ToolReturnPart)}


def parts(messages: list[ModelMessage]) -> list[bytes]:
    """Every part of a conversation, serialized, in order."""
    return [json.dumps(part).encode() for m in ModelMessagesTypeAdapter.dump_python(messages, mode="json")
            for part in m["parts"]]


def resume(workdir: Path, session_id: str, before: list[ModelMessage]) -> SavedSession:
    """Resume with a quick prompt; check that the saved rounds were kept and the model was told its kernel is new."""
    process = cli(workdir, "--resume", session_id, "-p", "one cell")
    out, err = process.communicate(timeout=RUN_LIMIT)
    assert process.returncode == 0, err
    assert "5050" in out
    assert f"Resumed session {session_id}" in err  # the banner's console (stderr in one-shot mode) says so
    saved = open_session(session_id, workdir)
    after = saved.messages()
    assert_valid(after)
    # nothing saved before the kill is lost or changed (a next prompt may join the last request)
    old, new = parts(before), parts(after)
    assert new[: len(old)] == old
    prompts = [p.content for m in after for p in m.parts if isinstance(p, UserPromptPart)][-2:]
    assert prompts == [RESUME_NOTE, "one cell"]
    return saved


def test_killed_while_the_model_streams_keeps_the_complete_round(workdir: Path) -> None:
    process = cli(workdir, "-p", "one cell", chunk_delay=0.3)
    # round one (a cell) is complete once its result is saved; round two then streams slowly
    wait_for(lambda: b"tool-return" in transcript(workdir), "the first round's results", process)
    time.sleep(1.0)
    kill(process)
    saved = session(workdir)
    assert saved is not None and not saved.in_use
    assert saved.agents[saved.main_id].status == "interrupted"
    before = saved.messages()
    assert [m.kind for m in before] == ["request", "response", "request"]  # prompt, call, result: round one
    assert "RESULT: 5050" in str(before[-1].parts[0].content)  # type: ignore[union-attr]
    resume(workdir, saved.session_id, before)


def test_killed_while_a_cell_runs_resumes_with_an_interrupted_result(workdir: Path) -> None:
    process = cli(workdir, "-p", "slow")
    wait_for(lambda: b"tool-call" in transcript(workdir), "the slow cell's call", process)
    time.sleep(1.5)  # the cell ticks
    kill(process)
    saved = session(workdir)
    assert saved is not None
    before = saved.messages()
    assert [m.kind for m in before] == ["request", "response"]
    repaired = saved.messages(repaired=True)
    assert_valid(repaired)
    assert repaired[-1].parts[0].content == INTERRUPTED_RESULT  # type: ignore[union-attr]
    after = resume(workdir, saved.session_id, before).messages()
    assert after[2].parts[0].content == INTERRUPTED_RESULT  # type: ignore[union-attr]


def test_killed_while_subagents_run_leaves_every_transcript_readable(workdir: Path) -> None:
    process = cli(workdir, "-p", "show me what you can do", chunk_delay=0.05)

    def children_working() -> bool:
        saved = session(workdir)
        return saved is not None and len(saved.children()) == 3 and all(
            b"tool-call" in transcript(workdir, child.agent_id) for child in saved.children()
        )

    wait_for(children_working, "three subagents at work", process)
    kill(process)
    saved = session(workdir)
    assert saved is not None
    children = saved.children()
    assert len(children) == 3 and {c.status for c in children} <= {"interrupted", "done"}
    assert sorted(c.agent_type for c in children) == ["general", "general", "reviewer"]
    assert {c.model for c in children if c.agent_type == "reviewer"} <= {"claude-demo", "anthropic:claude-demo"}
    for child in children:
        messages = saved.messages(child.agent_id)
        assert messages and messages[1].kind == "response"
        assert_valid(saved.messages(child.agent_id, repaired=True))
        assert saved.events(child.agent_id)
    before = saved.messages()
    assert sum(1 for m in before if m.kind == "response") == 3  # the image cell, the MCP-from-code cell, the tasks
    resume(workdir, saved.session_id, before)

    listing = subprocess.run(cli_command("sessions"), cwd=workdir,
                             env=cli_env(), capture_output=True, text=True, timeout=RUN_LIMIT)
    assert saved.session_id in listing.stdout and "show me what you can do" in listing.stdout
    child = children[0].agent_id
    shown = subprocess.run(
        cli_command("sessions", "show", saved.session_id, "--agent", child),
        cwd=workdir, env=cli_env(), capture_output=True, text=True, timeout=RUN_LIMIT,
    )
    assert shown.returncode == 0, shown.stderr
    assert child in shown.stdout and children[0].prompt.splitlines()[0][:40] in shown.stdout


def test_show_and_resume_refuse_unknown_sessions_clearly(workdir: Path) -> None:
    shown = subprocess.run(cli_command("sessions", "show", "nope"),
                           cwd=workdir, env=cli_env(), capture_output=True, text=True, timeout=RUN_LIMIT)
    assert shown.returncode == 2 and "no session 'nope'" in shown.stderr
    process = cli(workdir, "--resume", "-p", "one cell")
    _, err = process.communicate(timeout=RUN_LIMIT)
    assert process.returncode == 2 and "no saved session" in err


@pytest.fixture(autouse=True)
def _no_host_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FREEACT_SUB_WORKING_DIR", raising=False)


def test_the_session_list_at_80_columns_is_one_line_a_session_its_first_prompt_cut_to_fit(workdir: Path) -> None:
    prompt = ("count some words, and then tell me in some detail how you counted them, which tools you used and\n"
              "why, because I would like to learn how this works")
    for asked in (prompt, "one cell"):
        process = cli(workdir, "-p", asked)
        _, err = process.communicate(timeout=RUN_LIMIT)
        assert process.returncode == 0, err
    listed = subprocess.run(cli_command("sessions"), cwd=workdir,
                            env=cli_env(COLUMNS="80"), capture_output=True, text=True, timeout=RUN_LIMIT)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 3 and all(len(line) <= 80 for line in lines), lines  # the header, a line a session
    ids = [saved.session_id for saved in list_sessions(workdir)]
    assert lines[1].startswith(ids[0]) and "one cell" in lines[1]
    assert lines[2].startswith(ids[1]) and "count some words, and then" in lines[2] and "…" in lines[2]
