"""`freeact-sub acp --demo` driven by acpx, a headless ACP client from npm that nobody here wrote (issue 40).

acpx's own flows, each a command of its own: `sessions new` (one agent process hands out a session id and ends),
`prompt` (a queue owner of acpx starts the agent anew and loads that session, empty as it is), `set-mode`, a
`cancel` of a running prompt, and `exec` (a one-shot session). acpx is pinned to 0.1.15, which runs on CI's
Node.js 20 (later releases need 22); `.ci/run` installs it into `.cache/acpx`. acpx keeps a queue owner alive
between commands; the test ends it and every process under it by PID, and checks that no kernel is left.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import psutil
import pytest

from tests.e2e.terminal_driver import cli_env
from tests.npm_servers import acpx_binary

pytestmark = pytest.mark.timeout(600)  # six agent starts through acpx: about a minute on an idle 2-core machine

MARK = "FREEACT_SUB_ACPX_TEST"
"""Set in acpx's environment: its queue owner and our agent inherit it, so the test finds what acpx started."""


class Acpx:
    """acpx in a folder of its own, with a home of its own, talking to `freeact-sub acp --demo`."""

    def __init__(self, root: Path) -> None:
        self.binary = acpx_binary()
        self.work = root / "work"
        self.work.mkdir()
        home = root / "home"
        home.mkdir()
        self.env = cli_env(HOME=str(home), **{MARK: str(root)})
        self.agent = f"{sys.executable} -m freeact_sub.cli acp --demo"

    def args(self, *args: str, ttl: int = 60) -> list[str]:
        return [str(self.binary), "--approve-all", "--ttl", str(ttl), "--timeout", "120", "--agent", self.agent, *args]

    def run(self, *args: str, ttl: int = 60) -> str:
        done = subprocess.run(self.args(*args, ttl=ttl), cwd=self.work, env=self.env,
                              capture_output=True, text=True, timeout=180)
        output = done.stdout + done.stderr
        assert done.returncode == 0, output
        assert "-32602" not in output and "Invalid params" not in output, output
        return output

    def start(self, out: IO[str], *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.args(*args), cwd=self.work, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                text=True)

    def started(self) -> list[psutil.Process]:
        """acpx's processes (queue owners, our agents) and everything under them."""
        marked = []
        for process in psutil.process_iter():
            try:
                if process.environ().get(MARK) == self.env[MARK]:
                    marked.append(process)
            except psutil.Error:
                continue
        found = {p.pid: p for p in marked}
        for process in marked:
            try:
                found.update({child.pid: child for child in process.children(recursive=True)})
            except psutil.Error:
                continue
        return list(found.values())


    def stop(self) -> list[psutil.Process]:
        """End acpx's queue owners (each closes our agent's stdin: the agent stops its kernels itself), then
        whatever is left of what they started; returns the kernels that had to be killed."""
        started = self.started()
        for process in started:
            if "__queue-owner" in " ".join(_cmdline(process)):
                _signal(process, "terminate")
        _, alive = psutil.wait_procs(started, timeout=30)
        for process in alive:
            _signal(process, "kill")
        return [p for p in alive if "ipykernel" in " ".join(_cmdline(p))]


@pytest.fixture
def acpx(tmp_path: Path) -> Iterator[Acpx]:
    client = Acpx(tmp_path)
    try:
        yield client
    finally:
        assert not client.stop(), "a kernel outlived acpx's agent"


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def _signal(process: psutil.Process, how: str) -> None:
    try:
        getattr(process, how)()
    except psutil.Error:
        pass


def test_acpx_creates_prompts_switches_mode_cancels_and_runs_one_shot(acpx: Acpx) -> None:
    # `sessions new` in one process, `prompt` in another: the empty session loads (it was refused with -32602)
    made = acpx.run("sessions", "new", ttl=1)  # the owner goes when idle: our agent ends as it does in use
    session_id = made.split()[0]
    _, alive = psutil.wait_procs(acpx.started(), timeout=60)
    assert not alive, alive  # no agent holds the session any more: `prompt` must load it from disk
    assert (acpx.work / ".freeact-sub" / "sessions" / session_id / "index.jsonl").is_file(), made
    answered = acpx.run("prompt", "compute it in one cell")
    assert "RESULT: 5050" in answered and "[done] end_turn" in answered, answered

    # modes exist (`session/set_mode` was "Method not found"); what each does: tests/e2e/test_acp_sessions.py
    assert "mode set: ask" in acpx.run("set-mode", "ask")

    # a running prompt cancelled from another acpx command: the cell it ran ends failed, never left running
    log = acpx.work.parent / "slow.txt"
    with log.open("w") as out:
        slow = acpx.start(out, "--format", "json", "prompt", "something slow please")  # json: output as it streams
        try:
            deadline = time.monotonic() + 90
            while "tick 2" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert "tick 2" in log.read_text(), log.read_text()
            acpx.run("cancel")
            slow.wait(timeout=60)
        finally:
            if slow.poll() is None:
                slow.kill()
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert any(event.get("result", {}).get("stopReason") == "cancelled" for event in events), events[-3:]
    statuses = [update.get("status") for event in events
                if (update := event.get("params", {}).get("update", {})).get("sessionUpdate") == "tool_call_update"]
    assert statuses and statuses[-1] == "failed", statuses  # the interrupted cell, never left `in_progress`
    assert "tick 120" not in log.read_text()

    # a one-shot session
    once = acpx.run("exec", "compute it in one cell")
    assert "RESULT: 5050" in once and "[done] end_turn" in once, once
