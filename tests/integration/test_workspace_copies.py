"""Children with a private copy of the folder: what an isolated child gets where no copy-on-write view can be had.

The fallback is forced with `isolation_copy=True` (the config field a person sets too), in real kernels: under
the enforced sandbox (the copy is all the kernel may write) and with the sandbox off. The child's writes (code, a
subprocess, a removal) stay out of the folder while it runs and come back as an `apply_changes` request; four
children that append to one file lose nothing and the conflicts are shown; a folder over `isolation_copy_limit`
is refused with the limit named. One agent per sandbox setting serves the module.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from freeact_sub import Agent, ApprovalRequest, SubagentStarted
from freeact_sub.sandbox import platform_problem
from freeact_sub.workspaces.folder import copies_root
from tests.scripting import Call, Router, Script, configs, drive, tool_results, until

pytestmark = [pytest.mark.asyncio(loop_scope="module")]

config = configs(kernel_pool_size=0, mcp_pool_size=0, isolation_copy=True, max_subagents=4)

WRITES = (
    "import os, subprocess\n"
    "subprocess.run(['sh', '-c', 'echo from-a-subprocess > sub.txt'], check=True)\n"
    "os.remove('gone.txt')\n"
    "with open('shared.txt', 'a') as f:\n    f.write('child line\\n')\n"
    "os.makedirs('pkg', exist_ok=True)\n"
    "open('pkg/mod.py', 'w').write('X = 1\\n')\n"
    "os.makedirs('__pycache__', exist_ok=True)\n"
    "open('__pycache__/junk.pyc', 'wb').write(b'x')\n"
    "print('cwd=' + os.getcwd())\n"
)

APPEND = (
    "import time\n"
    "text = open('log.txt').read()\n"
    "time.sleep(0.5)\n"
    "open('log.txt', 'w').write(text + 'line {n}\\n')\n"
    "open('own-{n}.txt', 'w').write('{n}')\n"
)


class Shared:
    """The module's agent (one per sandbox setting), its router and its folder."""

    def __init__(self, folder: Path, sandbox: str) -> None:
        self.folder = folder
        self.sandbox = sandbox
        self.main = Script()
        self.router = Router({"MAIN": self.main})
        self.agent: Agent | None = None
        self.events: list[Any] = []

    async def run(self, steps: list[Any], children: dict[str, Script], asked: list[ApprovalRequest]) -> dict[str, str]:
        def decide(request: ApprovalRequest) -> bool:
            if request.tool_name == "apply_changes":
                asked.append(request)
            return True

        self.main.add(*steps)
        self.router.scripts.update(children)
        assert self.agent is not None
        first = self.main.calls
        self.events = await drive(self.agent.stream("MAIN go"), decide, limit=300)
        return self.main.tool_results(first + 1)

    def empty(self) -> Path:
        for path in self.folder.iterdir():
            if path.name != ".freeact-sub":
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        return self.folder


@pytest_asyncio.fixture(
    scope="module", loop_scope="module", params=["workspace", "off"] if platform_problem() is None else ["off"]
)
async def shared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Shared]:
    state = Shared(tmp_path_factory.mktemp("copies"), request.param)
    async with Agent(config(state.router.model, state.folder, sandbox=request.param, prestart_pools=True)) as agent:
        # the zygote a child's start warms up is the module's: started here, not in the first test
        await until(lambda: agent.tree.supplies.zygote.running, "the kernel zygote runs")
        state.agent = agent
        yield state


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != ".freeact-sub")


def _copies() -> set[str]:
    return {p.name for p in Path(copies_root()).iterdir()}


async def test_a_child_in_a_private_copy_writes_apart_and_its_change_set_is_applied(shared: Shared) -> None:
    work = shared.empty()
    (work / "gone.txt").write_text("old\n")
    (work / "shared.txt").write_text("first\n")
    (work / "link").symlink_to("/etc")  # copied as a link, never followed
    before = _copies()
    seen: dict[str, Any] = {}

    def look(messages: Any) -> list[Any]:  # the child's cell has run; it has not ended
        seen["folder"] = _names(work)
        seen["cwd"] = " ".join(tool_results(messages).values())
        return ["written"]

    asked: list[ApprovalRequest] = []
    steps = [[Call("task", {"prompt": "CHILD-a write", "isolation": "copy-on-write"}, id="a1")], ["done"]]
    code = WRITES
    if shared.sandbox != "off":  # confined: the copy is all it may write, the folder by its own name included
        code += (
            f"try:\n    open({str(work / 'escape.txt')!r}, 'w').write('x')\n"
            "except OSError as exc:\n    print('refused:', exc)\n"
        )
    results = await shared.run(steps, {"CHILD-a": Script([Call("execute_ipython_cell", {"code": code})], look)}, asked)
    assert seen["folder"] == ["gone.txt", "link", "shared.txt"]  # nothing of the child's while it ran
    if shared.sandbox != "off":
        assert "refused:" in seen["cwd"]
    assert f"cwd={copies_root()}" in seen["cwd"]  # it worked in its copy
    (started,) = [e for e in shared.events if isinstance(e, SubagentStarted)]
    assert "a private copy of the folder" in started.sandbox_limits  # the start says which mechanism
    (request,) = asked
    assert request.changes is not None
    kinds = {change.path: change.kind for change in request.changes.changes}
    # the link it did not touch is no change, and what it wrote in a cache folder is not brought back
    assert kinds == {"sub.txt": "added", "gone.txt": "removed", "shared.txt": "changed", "pkg/mod.py": "added"}
    assert "+child line" in next(c.diff for c in request.changes.changes if c.path == "shared.txt")
    assert _names(work) == ["link", "pkg", "shared.txt", "sub.txt"]
    assert (work / "shared.txt").read_text() == "first\nchild line\n"
    assert (work / "sub.txt").read_text() == "from-a-subprocess\n"
    assert (work / "link").is_symlink()
    assert "sub.txt: applied" in results["a1"]
    assert _copies() <= before  # the copy is gone once its set was applied


async def test_four_children_in_copies_that_append_to_one_file_lose_nothing(shared: Shared) -> None:
    if shared.sandbox == "off" and platform_problem() is None:
        pytest.skip("run under the enforced sandbox here (kept short: the mechanism is the same)")
    work = shared.empty()
    (work / "log.txt").write_text("header\n")
    count = 4
    calls = [
        Call("task", {"prompt": f"KID-{n} append", "isolation": "copy-on-write"}, id=f"k{n}") for n in range(count)
    ]
    scripts = {
        f"KID-{n} ": Script([Call("execute_ipython_cell", {"code": APPEND.format(n=n)})], ["ok"]) for n in range(count)
    }
    asked: list[ApprovalRequest] = []
    await shared.run([calls, ["done"]], scripts, asked)
    lines = (work / "log.txt").read_text().splitlines()
    assert lines[0] == "header"
    beside = {line for path in work.glob("log.agent-*.txt") for line in path.read_text().splitlines()}
    assert {f"line {n}" for n in range(count)} <= set(lines) | beside
    assert len(lines) == len(set(lines))
    assert all((work / f"own-{n}.txt").read_text() == str(n) for n in range(count))
    assert len(asked) == count
    starts = [e for e in shared.events if isinstance(e, SubagentStarted)]
    assert len(starts) == count and all("a private copy of the folder" in e.sandbox_limits for e in starts)
    assert sum(1 for r in asked if r.changes for c in r.changes.changes if c.path == "log.txt" and c.conflict) >= 1


async def test_a_folder_over_the_copy_limit_is_refused_naming_the_limit(shared: Shared) -> None:
    if shared.sandbox != "off":
        pytest.skip("the limit is checked before any kernel: once is enough")
    work = shared.empty()
    (work / "big.bin").write_bytes(b"x" * 5000)
    assert shared.agent is not None
    tree = shared.agent.tree
    limit = tree.config.isolation_copy_limit
    tree.config.isolation_copy_limit = 4096
    try:
        steps = [[Call("task", {"prompt": "CHILD-big write", "isolation": "copy-on-write"}, id="big")], ["done"]]
        results = await shared.run(steps, {"CHILD-big": Script(["never"])}, [])
    finally:
        tree.config.isolation_copy_limit = limit
    assert "isolation_copy_limit (4,096 bytes)" in results["big"]
    assert "did not start" in results["big"]
    assert not any(isinstance(e, SubagentStarted) for e in shared.events)  # never a silent shared folder
    assert _names(work) == ["big.bin"]
