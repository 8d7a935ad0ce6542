"""Rewind from a program: `Agent.checkpoints()` and `Agent.rewind(turn)` on a real kernel and a scripted model.

A turn's cell writes through Python's `csv` module, a subprocess and a removal; rewinding restores the bytes
exactly, cuts the conversation back, restarts the kernel and tells the model; the rewind itself is undone. The
hostile case: links the kernel placed where the folder had a file and a folder are removed as links, never
followed, and nothing outside the folder changes. Each test has its own agent: a rewind restarts the kernel.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
import pytest_asyncio

from freeact_sub import Agent, Rewound
from freeact_sub.agent.rewind import REWIND_NOTE
from freeact_sub.sessions import open_session
from freeact_sub.sessions.replay import UserPrompt
from tests.conftest import ROOT
from tests.scripting import Call, Script, drive, single_agent_config

pytestmark = pytest.mark.timeout(120)

WRITES = """
import csv, os, subprocess, sys
with open("data.csv", "w", newline="") as f:
    csv.writer(f).writerows([["name", "n"], ["b", 2], ["c", 3]])
subprocess.run([sys.executable, "-c", "open('notes.txt', 'a').write('from a subprocess\\\\n')"], check=True)
os.makedirs("out", exist_ok=True)
open("out/new.bin", "wb").write(bytes(range(256)))
os.remove("gone.txt")
print("written")
"""


@pytest_asyncio.fixture
async def shared(workdir: Path) -> AsyncIterator[tuple[Agent, Script, Path]]:
    script = Script()
    async with Agent(single_agent_config(script, workdir, auto_approve=True, kernel_pool_size=0)) as agent:
        yield agent, script, workdir


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink() and ".freeact-sub" not in p.parts
    }


async def test_rewind_restores_what_code_and_a_subprocess_wrote_and_cuts_the_conversation(
    shared: tuple[Agent, Script, Path],
) -> None:
    agent, script, work = shared
    (work / "data.csv").write_bytes(b"name,n\r\na,1\r\n")
    (work / "notes.txt").write_bytes(b"first line\n")
    (work / "gone.txt").write_bytes(b"to be removed\n")
    before = _files(work)
    history = agent.history
    script.reset([Call("execute_ipython_cell", {"code": WRITES})], ["Written."])
    await drive(agent.stream("write the files"))
    after = _files(work)
    assert after["notes.txt"] == b"first line\nfrom a subprocess\n" and "gone.txt" not in after

    points = agent.checkpoints()
    first = next(p for p in points if p.kind == "turn" and p.label == "write the files" and p.turn == 1)
    assert set(first.files) >= {"data.csv", "notes.txt", "gone.txt", "out", "out/new.bin"}
    pid = agent.kernel.pid if agent.kernel is not None else None

    event = await agent.rewind(first.number)
    assert isinstance(event, Rewound) and event.kernel_restarted and not event.failed
    assert _files(work) == before  # every byte, and nothing more (out/new.bin is gone)
    assert not (work / "out").exists()
    assert agent.history == history  # the prompt and what came after it are gone
    assert agent.kernel is not None and agent.kernel.pid != pid

    script.reset(["Fine."])
    await drive(agent.stream("what now?"))
    told = [
        part.content
        for message in script.requests[-1]
        for part in message.parts
        if getattr(part, "part_kind", "") == "user-prompt"
    ]
    assert REWIND_NOTE in told  # the model hears of the rewind in its next request

    await agent.rewind(event.undo)  # the rewind is itself a checkpoint: undo it
    assert _files(work) == after


async def test_links_the_kernel_placed_are_not_followed_when_restoring(
    shared: tuple[Agent, Script, Path],
    tmp_path: Path,
) -> None:
    agent, script, work = shared
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"the person's own file\n")
    (work / "sub").mkdir(exist_ok=True)
    (work / "sub" / "a.txt").write_bytes(b"inside\n")
    (work / "plain.txt").write_bytes(b"plain\n")
    before = _files(work)
    code = (
        f"import os, shutil\nshutil.rmtree('sub')\nos.symlink({str(outside)!r}, 'sub')\n"
        f"os.remove('plain.txt')\nos.symlink({str(outside / 'secret.txt')!r}, 'plain.txt')\nprint('linked')"
    )
    script.reset([Call("execute_ipython_cell", {"code": code})], ["Linked."])
    await drive(agent.stream("place links"))
    assert (work / "sub").is_symlink()

    point = next(p for p in reversed(agent.checkpoints()) if p.label == "place links" and p.turn == 1)
    event = await agent.rewind(point.number)
    assert not event.failed
    assert not (work / "sub").is_symlink() and not (work / "plain.txt").is_symlink()
    assert _files(work) == before
    assert sorted(os.listdir(outside)) == ["secret.txt"]  # nothing written outside the folder
    assert (outside / "secret.txt").read_bytes() == b"the person's own file\n"


_HOST = """
import asyncio, sys
from freeact_sub import Agent, AgentConfig
from tests.scripting import Call, Script, drive

async def main():
    code = ("import subprocess, sys\\n"
            "subprocess.run([sys.executable, '-c', \\"open('log.txt', 'w').write('changed')\\"])")
    script = Script([Call("execute_ipython_cell", {"code": code})], ["Done."])
    config = AgentConfig(model=script.model, working_dir=sys.argv[1], auto_approve=True, enable_subagents=False,
                         kernel_pool_size=0, mcp_pool_size=0)
    async with Agent(config) as agent:
        await drive(agent.stream("change the log"))
        print("SESSION", agent.session_id, flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


def _session_of_a_killed_host(workdir: Path) -> str:
    """Run a host whose agent changes `log.txt` in a turn, kill it (SIGKILL) after; its session's id."""
    host = subprocess.Popen(
        [sys.executable, "-c", _HOST, str(workdir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    session = None
    try:
        assert host.stdout is not None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and session is None:
            line = host.stdout.readline()
            if line.startswith("SESSION "):
                session = line.split()[1]
            elif not line and host.poll() is not None:
                break
        assert session is not None, "the host did not finish its turn"
        descendants = psutil.Process(host.pid).children(recursive=True)
        os.kill(host.pid, signal.SIGKILL)
        host.wait(30)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(30)
    for process in descendants:  # the killed host's kernel: ours to end here
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(descendants, timeout=10)
    return session


async def test_a_session_resumed_after_sigkill_can_still_rewind(workdir: Path) -> None:
    (workdir / "log.txt").write_bytes(b"original\n")
    session = await asyncio.to_thread(_session_of_a_killed_host, workdir)
    assert (workdir / "log.txt").read_bytes() == b"changed"

    script = Script()
    async with Agent(single_agent_config(script, workdir, kernel_pool_size=0), session=session) as agent:
        (point,) = [p for p in agent.checkpoints() if p.label == "change the log" and p.turn == 1]
        assert "log.txt" in point.files
        event = await agent.rewind(point.number)
        assert (workdir / "log.txt").read_bytes() == b"original\n" and not event.failed
        assert agent.history == []
        script.add(["Back again."])
        await drive(agent.stream("after the rewind"))
    # the session's record of what the person saw keeps the rewind: a replay shows it, before what came after
    replayed = open_session(session, workdir).events()
    (shown,) = [e for e in replayed if isinstance(e, Rewound)]
    assert (shown.checkpoint, shown.undo, shown.restored) == (point.number, event.undo, event.restored)
    later = next(i for i, e in enumerate(replayed) if isinstance(e, UserPrompt) and "after the rewind" in e.content)
    assert replayed.index(shown) < later
