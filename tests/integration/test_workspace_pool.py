"""Isolated children's kernels from the pool: booted ahead, each in a copy-on-write view of its own.

Real kernels forked by the real zygote under the `workspace` profile, with the tree's `Supplies` as an agent tree
uses them. A pooled view was mounted before its child started: the child must still see the folder as it is when it
starts (files changed in place, replaced by a rename, added and removed between the boot and the hand-out), its
change set must be exact and its conflicts those of a folder changed after its start; siblings must not see each
other's writes, nor write the real folder by another name; and the views nobody took go with the pool.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from freeact_sub import Agent, AgentConfig, ApprovalRequest, SubagentStarted
from freeact_sub.kernels.backends import KernelBackend
from freeact_sub.kernels.cells import Cell
from freeact_sub.sandbox import BUILT_IN_PROFILES, kernel_folders
from freeact_sub.sandbox.views import copy_on_write_platform_problem
from freeact_sub.tree.supplies import Supplies
from freeact_sub.workspaces import Workspace, mark_conflicts
from tests.scripting import Call, Router, Script, configs, drive, until

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(
        copy_on_write_platform_problem() is not None,
        reason=f"no copy-on-write views here: {copy_on_write_platform_problem()}",
    ),
]

PROFILE = BUILT_IN_PROFILES["workspace"]
config = configs(kernel_pool_size=1, mcp_pool_size=0, prestart_pools=False)


class Tree:
    """A test's supplies (a pool of 2 views under `workspace`) and working folder."""

    def __init__(self, folder: Path, supplies: Supplies) -> None:
        self.folder = folder
        self.supplies = supplies

    async def ready_views(self, count: int) -> set[int | None]:
        """Wait until `count` kernels wait in views of their own; their pids."""
        self.supplies.expect_views(PROFILE, count)
        views = self.supplies.view_pools[PROFILE]
        await until(lambda: views.pool.ready >= count, f"{count} pooled views")
        return {k.pid for k in _waiting(views.pool)}

    def workspace(self) -> Workspace:
        """What `open_workspace` makes for an isolated child when its `task` call runs."""
        return Workspace.create(kernel_folders.create("ws-"), self.folder)


@pytest_asyncio.fixture(loop_scope="module")
async def tree(tmp_path: Path) -> AsyncIterator[Tree]:
    """A test's own supplies (their kernels stop with it); the zygote is the process's, warm after the first."""
    folder = tmp_path / "work"
    folder.mkdir()
    config = AgentConfig(model="test", working_dir=folder, kernel_pool_size=2, save_sessions=False)
    supplies = Supplies(lambda: config, "pool-test")
    supplies.sandbox = PROFILE
    supplies.start()
    try:
        yield Tree(folder, supplies)
    finally:
        await supplies.close()


def _waiting(pool: Any) -> list[KernelBackend]:
    """The kernels waiting in `pool`, the next one first."""
    return [k for k in list(pool._ready._queue) if not isinstance(k, BaseException)]


def _alive(pid: int | None) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _booted_at(pid: int) -> float:
    """When process `pid` started, on the monotonic clock's scale (from /proc: its start in clock ticks)."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        ticks = int(stat.read().rsplit(b")", 1)[1].split()[19])
    with open("/proc/uptime") as uptime:
        up = float(uptime.read().split()[0])
    return time.monotonic() - (up - ticks / os.sysconf("SC_CLK_TCK"))


async def _run(kernel: KernelBackend, code: str) -> str:
    result = await kernel.run_cell(Cell(code=code))
    assert result.status == "ok", result.text
    return result.text


async def test_a_view_booted_ahead_shows_the_folder_as_it_is_at_the_child_s_start_and_its_changes_are_exact(
    tree: Tree,
) -> None:
    work = tree.folder
    (work / "sub").mkdir()
    for name, text in {
        "inplace.txt": "a\n",
        "renamed.txt": "b\n",
        "sub/deep.txt": "c\n",
        "gone.txt": "d\n",
        "later.txt": "e\n",
    }.items():
        (work / name).write_text(text)
    pooled = await tree.ready_views(1)
    # between the view's boot and the child's start, the folder changes every way it can
    (work / "inplace.txt").write_text("a2\n")
    for name in ("renamed.txt", "sub/deep.txt"):  # replaced as editors and apply_changes do: a new file renamed over
        (work / f"{name}.new").write_text(name + " 2\n")
        os.replace(work / f"{name}.new", work / name)
    (work / "added.txt").write_text("new\n")
    (work / "gone.txt").unlink()
    workspace = tree.workspace()
    asked = time.monotonic()
    kernel = await tree.supplies.acquire_kernel("child-1", PROFILE, is_child=True, workspace=workspace)
    try:
        assert (
            kernel.pid is not None and kernel.pid in pooled and _booted_at(kernel.pid) < asked
        )  # booted before the child asked: no fork
        seen = await _run(
            kernel,
            "import os\nprint({n: open(n).read() if os.path.exists(n) else None for n in "
            "['inplace.txt', 'renamed.txt', 'sub/deep.txt', 'added.txt', 'gone.txt']})",
        )
        assert eval(seen) == {
            "inplace.txt": "a2\n",
            "renamed.txt": "renamed.txt 2\n",
            "sub/deep.txt": "sub/deep.txt 2\n",
            "added.txt": "new\n",
            "gone.txt": None,
        }
        await _run(
            kernel,
            "for n in ['renamed.txt', 'sub/deep.txt', 'later.txt']:\n"
            "    open(n, 'a').write('child\\n')\nopen('mine.txt', 'w').write('m\\n')\n"
            "os.remove('added.txt')",
        )
        assert not (work / "mine.txt").exists() and (work / "renamed.txt").read_text() == "renamed.txt 2\n"
        (work / "later.txt").write_text("e, changed in the folder after the child started\n")
    finally:
        await kernel.shutdown(now=True)
    changes = workspace.read_changes()
    mark_conflicts(changes)
    kinds = {c.path: (c.kind, c.conflict is not None) for c in changes.changes}
    # what changed before its start was its base (no conflict); what changed after is one
    assert kinds == {
        "renamed.txt": ("changed", False),
        "sub/deep.txt": ("changed", False),
        "later.txt": ("changed", True),
        "mine.txt": ("added", False),
        "added.txt": ("removed", False),
    }
    diff = next(c.diff for c in changes.changes if c.path == "renamed.txt")
    assert "-renamed.txt 2" not in diff and "+child" in diff
    workspace.remove()


async def test_pooled_views_are_apart_and_none_reaches_the_real_folder(tree: Tree) -> None:
    work = tree.folder
    pooled = await tree.ready_views(2)
    spaces = [tree.workspace(), tree.workspace()]
    kernels = [
        await tree.supplies.acquire_kernel(f"kid-{n}", PROFILE, is_child=True, workspace=spaces[n]) for n in range(2)
    ]
    try:
        assert {k.pid for k in kernels} == pooled
        await _run(kernels[0], "open('from-0.txt', 'w').write('0')")
        escape = (
            f"import os\nfound = {{}}\nfor p in ['/proc/{os.getpid()}/root{work}/escaped.txt', "
            f"'{spaces[1].upper}/escaped.txt', '{spaces[0].upper}/escaped.txt']:\n"
            "    try:\n        open(p, 'w').write('x'); found[p] = 'written'\n"
            "    except OSError as exc:\n        found[p] = exc.errno\n"
            "print(os.path.exists('from-0.txt'), sorted(v for v in found.values() if v == 'written'))"
        )
        assert await _run(kernels[1], escape) == "False []\n"
    finally:
        for kernel in kernels:
            await kernel.shutdown(now=True)
    assert [c.path for c in spaces[0].read_changes().changes] == ["from-0.txt"]
    assert not spaces[1].read_changes()
    assert not (work / "from-0.txt").exists() and not (work / "escaped.txt").exists()
    assert spaces[0].folder != spaces[1].folder
    for space in spaces:
        space.remove()


async def test_a_view_written_before_its_child_started_is_not_handed_out_and_unused_views_go_with_the_pool(
    tree: Tree,
) -> None:
    pooled = await tree.ready_views(2)
    views = tree.supplies.view_pools[PROFILE]
    spoiled = views._views[id(_waiting(views.pool)[0])]  # the next one handed out
    (spoiled.upper / "left-by-boot.txt").write_text("x")
    workspace = tree.workspace()
    kernel = await tree.supplies.acquire_kernel("child-3", PROFILE, is_child=True, workspace=workspace)
    try:
        assert workspace.folder != spoiled.folder and not spoiled.folder.exists()
        assert await _run(kernel, "import os; print(os.path.exists('left-by-boot.txt'))") == "False\n"
    finally:
        await kernel.shutdown(now=True)
        workspace.remove()
    assert pooled
    left_pids = await tree.ready_views(1)  # the pool tops itself up: a view nobody took
    left = [v.folder for v in views._views.values()]
    assert left and left_pids
    await tree.supplies.close()
    assert not any(folder.exists() for folder in left)  # the views nobody took went with their kernels
    assert not any(_alive(pid) for pid in left_pids)


async def test_an_announced_isolated_task_call_boots_its_child_s_view_while_it_waits_for_approval(
    tmp_path: Path,
) -> None:
    work = tmp_path / "agent-work"
    work.mkdir()
    (work / "notes.txt").write_text("before\n")
    main = Script([Call("task", {"prompt": "KID write", "isolation": "copy-on-write"}, id="t1")], ["done"])
    kid = Script([Call("execute_ipython_cell", {"code": "open('notes.txt', 'a').write('kid\\n')"})], ["ok"])
    router = Router({"MAIN": main, "KID": kid})
    booted: set[int | None] = set()
    pids: dict[str, int] = {}
    async with Agent(config(router.model, work)) as agent:

        async def while_asked(event: Any) -> None:
            if isinstance(event, ApprovalRequest) and event.tool_name == "task":
                views = agent.tree.supplies.view_pools.get(agent.tree.supplies.sandbox)
                await until(
                    lambda: views is not None and views.pool.ready >= 1, "a view booted for the announced child"
                )
                plain = agent.tree.supplies.pool
                assert views is not None and plain.ready + plain.booting <= 1  # its size: none for this child
                booted.update(k.pid for k in _waiting(views.pool))

        def note_pid(event: Any) -> None:  # while the child runs (its kernel's pid goes when it stops)
            record = agent.tree.agents.get(event.agent_id)
            kernel = getattr(record.agent, "kernel", None) if record is not None else None
            if kernel is not None and kernel.pid is not None:
                pids.setdefault(event.agent_id, kernel.pid)

        events = await drive(agent.stream("MAIN go"), True, on_event=[while_asked, note_pid], limit=120)
    (child,) = [e.subagent_id for e in events if isinstance(e, SubagentStarted)]
    assert pids[child] in booted
    assert (work / "notes.txt").read_text() == "before\nkid\n"  # its change set, approved and applied
