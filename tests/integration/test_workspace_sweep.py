"""A host killed (SIGKILL) while an isolated child runs leaves the child's workspace (`ws-*`: its overlay's upper
and work folders); the next host's start sweeps it, and leaves a live host's workspace and a link in place."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from freeact_sub.sandbox import kernel_folders
from freeact_sub.sandbox.views import copy_on_write_platform_problem
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(
    copy_on_write_platform_problem() is not None,
    reason=f"no copy-on-write views here: {copy_on_write_platform_problem()}",
)

_HOST = """
import asyncio, sys
from freeact_sub import Agent, AgentConfig
from tests.scripting import Call, Router, Script, drive

async def main():
    main = Script([Call("task", {"prompt": "CHILD write", "isolation": "copy-on-write"})], ["done"])
    code = "import os, time\\nos.makedirs('locked/inner')\\nopen('locked/inner/f.txt', 'w').write('x')\\n" \\
           "os.chmod('locked/inner', 0)\\nos.chmod('locked', 0)\\nopen('written.txt', 'w').write('x')\\ntime.sleep(600)"
    child = Script([Call("execute_ipython_cell", {"code": code})], ["never"])
    model = Router({"MAIN": main, "CHILD": child}).model
    config = AgentConfig(model=model, working_dir=sys.argv[1], auto_approve=True, kernel_pool_size=0,
                         mcp_pool_size=0)
    async with Agent(config) as agent:
        await drive(agent.stream("MAIN go"))

asyncio.run(main())
"""


def _workspaces_of(root: Path, pid: int) -> list[Path]:
    found = []
    for folder in root.glob("ws-*"):
        try:
            if int((folder / "owner").read_text()) == pid:
                found.append(folder)
        except (OSError, ValueError):
            continue
    return found


def test_a_killed_hosts_workspace_is_swept_by_the_next_start_and_a_live_ones_stays(tmp_path: Path) -> None:
    temp, work = Path(tempfile.mkdtemp(prefix="sw-")), tmp_path / "work"  # short: the kernels' socket paths
    work.mkdir()
    root = temp / f"freeact-sub-{os.getuid()}"  # the private root of hosts started with this TMPDIR
    host = subprocess.Popen(
        [sys.executable, "-c", _HOST, str(work)],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(temp)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    descendants: list[psutil.Process] = []
    try:
        deadline, written = time.monotonic() + 120, None
        while time.monotonic() < deadline and written is None and host.poll() is None:
            written = next(
                (ws for ws in _workspaces_of(root, host.pid) if (ws / "upper" / "written.txt").exists()), None
            )
            time.sleep(0.1)
        assert written is not None, "the isolated child did not write into its workspace"
        assert not (work / "written.txt").exists()
        descendants = psutil.Process(host.pid).children(recursive=True)
        os.kill(host.pid, signal.SIGKILL)
        host.wait(30)
        for process in descendants:  # the killed host's kernels and zygote: ours to end here
            try:
                process.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(descendants, timeout=10)

        theirs = root / "ws-live"  # a live host's workspace, with a link to a folder outside it
        (theirs / "upper").mkdir(parents=True)
        (theirs / "owner").write_text(str(live.pid))
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "keep.txt").write_text("the person's")
        os.chmod(outside, 0o500)
        (written / "upper" / "link").symlink_to(outside)
        left = _workspaces_of(root, host.pid)  # the child's, and any view made ahead for another
        assert written in left

        swept = kernel_folders.sweep(str(root))  # what the next host's first folder does

        assert {str(ws) for ws in left} <= set(swept) and not any(ws.exists() for ws in left)
        assert theirs.is_dir() and str(theirs) not in swept
        assert (outside / "keep.txt").read_text() == "the person's" and os.stat(outside).st_mode & 0o777 == 0o500
    finally:
        for process in (host, live):
            if process.poll() is None:
                process.kill()
                process.wait(30)
        for process in descendants:
            try:
                process.kill()
            except psutil.Error:
                pass
        if (tmp_path / "outside").exists():
            os.chmod(tmp_path / "outside", 0o700)
        shutil.rmtree(temp, ignore_errors=True)  # the killed host's kernel folders, and whatever the test left
