"""One kernel zygote per host process: no zygote for a lone agent, then main kernels forked on any event loop."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.timeout(120)

# Three main agents one after another, each under its own `asyncio.run` (its own event loop), as a program or a
# notebook that starts agents repeatedly does. Each runs a cell that says who its kernel's parent is.
PROGRAM = """
import asyncio, json, os, sys
from freeact_sub import Agent
from freeact_sub.kernels.zygote import close_process_zygote, process_zygote_pids
from tests.processes import is_gone
from tests.scripting import Call, Script, drive, single_agent_config

os.environ["HOST_ONLY_SECRET"] = "s3cret"
CELL = "import os; print('PARENT', os.getppid(), os.environ.get('HOST_ONLY_SECRET'), os.getcwd())"

async def one(workdir):
    script = Script([Call("execute_ipython_cell", {"code": CELL})], ["done"])
    async with Agent(single_agent_config(script, workdir)) as agent:
        await drive(agent.stream("go"))
        output = script.tool_results(1)["call-1"]
        owned = agent.own_processes()
    return {"output": output, "owned": owned, "kernel": owned[0], "zygotes": sorted(process_zygote_pids())}

rows = [asyncio.run(one(sys.argv[i])) for i in (1, 2, 3)]
zygotes = process_zygote_pids()
close_process_zygote()
rows.append({"closed": asyncio.run(is_gone(min(zygotes))) if zygotes else None,
             "after": sorted(process_zygote_pids())})
print("ROWS", json.dumps(rows), flush=True)
"""


async def test_main_kernels_are_forked_by_one_zygote_from_the_second_agent_on_across_event_loops(
    tmp_path: Path,
) -> None:
    folders = [tmp_path / name for name in "abc"]
    for folder in folders:
        folder.mkdir()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PROGRAM, *map(str, folders),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), 100)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, stderr.decode()[-3000:]
    first, second, third, closing = json.loads(stdout.decode().split("ROWS ", 1)[1])
    parents = [int(row["output"].split("PARENT ", 1)[1].split()[0]) for row in (first, second, third)]
    # a lone agent (a one-shot) starts no zygote: its kernel is launched by the host itself
    assert first["zygotes"] == [] and parents[0] == process.pid
    # the second main agent starts the process's zygote and its kernel is forked by it; the third, on yet
    # another event loop, is forked by the same one
    (zygote,) = second["zygotes"]
    assert parents[1] == parents[2] == zygote and third["zygotes"] == [zygote]
    # an agent owns its kernel, never the shared zygote
    assert all(row["owned"] == [row["kernel"]] and zygote not in row["owned"] for row in (first, second, third))
    # a forked kernel takes its own working folder and its environment is built for it, not the host's
    for row, folder in zip((first, second, third), folders, strict=True):
        assert row["output"].split()[2:4] == ["None", str(folder)]
    # `close_process_zygote()` stops it
    assert closing == {"closed": True, "after": []}


async def test_a_changed_kernel_environment_gets_a_new_zygote_and_the_old_one_ends_with_its_last_kernel(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from freeact_sub.kernels.local import Kernel
    from freeact_sub.kernels.zygote import process_zygote, process_zygote_pids
    from tests.processes import is_gone

    monkeypatch.setenv("TZ", "Etc/GMT+3")  # a variable every kernel sees: a fork cannot change it
    old = process_zygote()
    await old.start()
    kernel = Kernel(working_dir=workdir, launcher=old)
    try:
        await kernel.start()
        assert old.pid is not None and kernel.pid in old.kernels and old.pid in process_zygote_pids()
        monkeypatch.setenv("TZ", "Etc/GMT-5")
        new = process_zygote()
        assert new is not old and new.pid is None  # made, not started: the next agent that needs it starts it
        assert old.running and old.pid in process_zygote_pids()  # it still serves its kernel
        assert "4" in (await kernel.execute("print(2 + 2)")).text
    finally:
        await kernel.shutdown(now=True)
    assert await is_gone(old.pid, wait=10)  # it ended with its last kernel
    assert old.pid not in process_zygote_pids()


async def test_a_kernel_whose_environment_sets_pythonpath_is_launched_not_forked(tmp_path: Path) -> None:
    """`kernel_env` may set what Python reads as it starts (`PYTHONPATH`, `PYTHONHOME`, …): a forked kernel's
    interpreter started in the zygote, without it, so such a kernel is launched and gets it."""
    from freeact_sub.kernels.local import Kernel
    from freeact_sub.kernels.zygote import process_zygote

    zygote = process_zygote()
    await zygote.start()
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "my_helpers.py").write_text("ANSWER = 42\n")
    code = "import os, my_helpers; print(my_helpers.ANSWER, os.getppid())"
    async with Kernel(working_dir=tmp_path, env={"PYTHONPATH": str(libs)}, launcher=zygote) as kernel:
        answer, parent = (await kernel.execute(code)).text.split()
    assert answer == "42" and int(parent) != zygote.pid
    async with Kernel(working_dir=tmp_path, launcher=zygote) as kernel:  # without such a variable: forked
        assert int((await kernel.execute("import os; print(os.getppid())")).text) == zygote.pid


async def test_a_kernel_asked_for_while_the_zygote_starts_is_forked_once_it_is_ready(tmp_path: Path) -> None:
    """A tree's first children ask for kernels while the zygote does its imports: they wait for it and are forked,
    rather than each launching a Python of its own (three times a fork's CPU)."""
    from freeact_sub.kernels.local import Kernel
    from freeact_sub.kernels.zygote import KernelZygote

    zygote = KernelZygote()
    zygote.launch()
    try:
        assert zygote.starting
        async with Kernel(working_dir=tmp_path, launcher=zygote) as kernel:
            assert int((await kernel.execute("import os; print(os.getppid())")).text) == zygote.pid
    finally:
        await zygote.close()
