"""Children with a workspace of their own (`isolation: copy-on-write`), in real kernels under the real sandbox.

The child's writes (through code and a subprocess, and a removal) stay out of the folder while it runs, come back
as a change set in an `apply_changes` request, and land only once approved; ten children that all append to one
file lose nothing, where children that share the folder do. One agent serves the module: each test plans its own
conversations on the shared router and empties the folder first.
"""

from __future__ import annotations

import io
import shutil
import zipfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from rich.console import Console

from freeact_sub import Agent, ApprovalRequest, SubagentStarted
from freeact_sub.sandbox.views import copy_on_write_platform_problem
from freeact_sub.terminal.change_view import print_kept_changes
from tests.scripting import Call, Router, Script, configs, drive, until

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(copy_on_write_platform_problem() is not None,
                       reason=f"no copy-on-write views here: {copy_on_write_platform_problem()}"),
]

config = configs(kernel_pool_size=0, mcp_pool_size=0)

WRITES = (
    "!{{sys.executable}} -m pip install -q --no-index --no-deps --target vendor {wheel}\n"
    "import subprocess, os\n"
    "subprocess.run(['sh', '-c', 'echo from-a-subprocess > sub.txt'], check=True)\n"
    "os.remove('gone.txt')\n"
    "with open('shared.txt', 'a') as f:\n    f.write('child line\\n')\n"
    "os.makedirs('pkg', exist_ok=True)\n"
    "open('pkg/mod.py', 'w').write('X = 1\\n')\n"
    "print(sorted(os.listdir('.')))\n"
)


class Shared:
    """The module's agent, its router and its folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.main = Script()
        self.router = Router({"MAIN": self.main})
        self.agent: Agent | None = None
        self.events: list[Any] = []
        """The last turn's events."""

    async def run(self, steps: list[Any], children: dict[str, Script],
                  decide: Callable[[ApprovalRequest], bool]) -> dict[str, str]:
        """One turn of the main agent on `steps`, with `children` routed by their prompts; the results its second
        request read."""
        self.main.add(*steps)
        self.router.scripts.update(children)
        assert self.agent is not None
        first = self.main.calls
        self.events = await drive(self.agent.stream("MAIN go"), decide, limit=300)
        return self.main.tool_results(first + 1)

    def empty(self) -> Path:
        for path in self.folder.iterdir():
            if path.name != ".freeact-sub":  # the host's sessions are there
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        return self.folder


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Shared]:
    state = Shared(tmp_path_factory.mktemp("workspaces"))
    async with Agent(config(state.router.model, state.folder, max_subagents=10, prestart_pools=True)) as agent:
        # the zygote the children's kernels fork from is the module's: started here, not in the first test
        await until(lambda: agent.tree.supplies.zygote.running, "the kernel zygote runs")
        state.agent = agent
        yield state


def _wheel(folder: Path) -> Path:
    """A wheel of one module, made here (no index is reached): what `!pip install --target` installs."""
    path = folder / "tiny-1.0-py3-none-any.whl"
    files = {"tiny.py": "VALUE = 1\n",
             "tiny-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n",
             "tiny-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                         "Tag: py3-none-any\n"}
    record = "".join(f"{name},,\n" for name in files) + "tiny-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in {**files, "tiny-1.0.dist-info/RECORD": record}.items():
            wheel.writestr(name, text)
    return path


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != ".freeact-sub")


def _folder(shared: Shared) -> Path:
    work = shared.empty()
    (work / "gone.txt").write_text("old\n")
    (work / "shared.txt").write_text("first\n")
    return work


def _asked(into: list[ApprovalRequest], choose: Callable[[ApprovalRequest], bool] = lambda r: True) -> Any:
    def decide(request: ApprovalRequest) -> bool:
        if request.tool_name != "apply_changes":
            return True
        into.append(request)
        return choose(request)

    return decide


async def test_a_child_s_writes_stay_apart_until_its_change_set_is_approved(
    shared: Shared, tmp_path_factory: pytest.TempPathFactory
) -> None:
    work = _folder(shared)
    seen_while_running: dict[str, Any] = {}

    def look(messages: Any) -> list[Any]:  # the child's second request: its cell has run, it has not ended
        seen_while_running["folder"] = _names(work)
        seen_while_running["shared"] = (work / "shared.txt").read_text()
        return ["written"]

    steps = [[Call("task", {"prompt": "CHILD-a write", "isolation": "copy-on-write"}, id="a1")], ["done"]]
    asked: list[ApprovalRequest] = []
    code = "import sys\n" + WRITES.format(wheel=_wheel(tmp_path_factory.mktemp("wheel")))
    results = await shared.run(steps, {"CHILD-a": Script([Call("execute_ipython_cell", {"code": code})], look)},
                               _asked(asked))
    assert seen_while_running == {"folder": ["gone.txt", "shared.txt"], "shared": "first\n"}
    (started,) = [e for e in shared.events if isinstance(e, SubagentStarted)]
    assert "a workspace of its own (copy-on-write" in started.sandbox_limits  # the start says which mechanism
    (request,) = asked
    assert request.changes is not None
    kinds = {change.path: change.kind for change in request.changes.changes if not change.path.startswith("vendor/")}
    assert kinds == {"sub.txt": "added", "gone.txt": "removed", "shared.txt": "changed", "pkg/mod.py": "added"}
    assert "vendor/tiny.py" in request.changes.paths()  # what pip installed, through its own process
    diff = next(c.diff for c in request.changes.changes if c.path == "shared.txt")
    assert "+child line" in diff
    assert _names(work) == ["pkg", "shared.txt", "sub.txt", "vendor"]
    assert (work / "vendor" / "tiny.py").read_text() == "VALUE = 1\n"
    assert (work / "shared.txt").read_text() == "first\nchild line\n"
    assert (work / "sub.txt").read_text() == "from-a-subprocess\n"
    result = results["a1"]
    assert "applied to the working folder" in result and "sub.txt: applied" in result


async def test_a_rejected_change_set_leaves_the_folder_as_it_was_and_a_file_left_out_is_not_applied(
    shared: Shared,
) -> None:
    work = _folder(shared)
    results = []
    for choice in ("reject", "pick"):
        steps = [[Call("task", {"prompt": f"CHILD-{choice} write", "isolation": "copy-on-write"}, id=f"b-{choice}")],
                 ["done"]]

        def choose(request: ApprovalRequest, choice: str = choice) -> bool:
            assert request.changes is not None
            if choice == "reject":
                return False
            for change in request.changes.changes:
                change.apply = change.path == "sub.txt"  # the person's per-file choice
            return True

        child = Script([Call("execute_ipython_cell", {"code": WRITES.split("\n", 1)[1]})], ["written"])
        found = await shared.run(steps, {f"CHILD-{choice}": child}, _asked([], choose))
        results.append(found[f"b-{choice}"])
        if choice == "reject":
            assert _names(work) == ["gone.txt", "shared.txt"]
            assert (work / "shared.txt").read_text() == "first\n"
    assert "were not applied" in results[0] and "sub.txt" in results[0]
    # kept in the session, listed by `sessions show`, until the session is deleted
    sessions = work / ".freeact-sub" / "sessions"
    (kept,) = sessions.glob("*/changes/*/files/sub.txt")  # the rejected set's (the picked one applied it)
    assert kept.read_text() == "from-a-subprocess\n"
    assert len(list(sessions.glob("*/changes/*/files/pkg/mod.py"))) == 2  # rejected, and left out when picking
    session = kept.parents[3]
    out = io.StringIO()
    print_kept_changes(Console(file=out, width=200), session)
    assert "Change sets not applied" in out.getvalue() and "sub.txt: added" in out.getvalue()
    assert _names(work) == ["gone.txt", "shared.txt", "sub.txt"]
    assert (work / "shared.txt").read_text() == "first\n"
    assert "shared.txt: skipped" in results[1]


APPEND = (
    "import time\n"
    "text = open('log.txt').read()\n"
    "time.sleep(1.0)\n"  # read, think, write: what a script that edits a file does
    "open('log.txt', 'w').write(text + 'line {n}\\n')\n"
    "open('own-{n}.txt', 'w').write('{n}')\n"
)


async def _children(shared: Shared, count: int, isolation: str) -> list[ApprovalRequest]:
    calls = [Call("task", {"prompt": f"KID-{isolation}-{n} append", "isolation": isolation}, id=f"k-{isolation}-{n}")
             for n in range(count)]
    scripts = {f"KID-{isolation}-{n} ": Script([Call("execute_ipython_cell", {"code": APPEND.format(n=n)})], ["ok"])
               for n in range(count)}
    asked: list[ApprovalRequest] = []
    await shared.run([calls, ["done"]], scripts, _asked(asked))
    return asked


async def test_ten_parallel_children_that_append_to_one_file_lose_nothing_when_isolated(shared: Shared) -> None:
    work = shared.empty()
    (work / "log.txt").write_text("header\n")
    asked = await _children(shared, 10, "copy-on-write")
    lines = (work / "log.txt").read_text().splitlines()
    assert lines[0] == "header"
    # merged into log.txt, or (where a merge could not be sure) kept beside it, named in the result: never lost
    beside = {line for path in work.glob("log.agent-*.txt") for line in path.read_text().splitlines()}
    assert {f"line {n}" for n in range(10)} <= set(lines) | beside
    assert len(lines) == len(set(lines))  # and nothing doubled
    assert all((work / f"own-{n}.txt").read_text() == str(n) for n in range(10))
    assert len(asked) == 10
    # every set after the first met a folder that had changed since it started: shown, not silent
    assert sum(1 for r in asked if r.changes for c in r.changes.changes if c.path == "log.txt" and c.conflict) >= 1
    # children sharing the folder: each overwrote what the others wrote
    work = shared.empty()
    (work / "log.txt").write_text("header\n")
    await _children(shared, 3, "shared")
    assert len((work / "log.txt").read_text().splitlines()) < 4


async def test_children_started_from_code_can_have_workspaces_too(shared: Shared) -> None:
    work = shared.empty()
    cell = ("from freeact_sub_tasks import map_tasks\n"
            "print(await map_tasks('CODE-KID-{} write', [0, 1], isolation='copy-on-write'))")
    kids = {f"CODE-KID-{n} ": Script([Call("execute_ipython_cell", {"code": f"open('kid-{n}.txt', 'w').write('{n}')"})],
                                     ["ok"]) for n in range(2)}
    asked: list[ApprovalRequest] = []
    await shared.run([[Call("execute_ipython_cell", {"code": cell}, id="c1")], ["done"]], kids, _asked(asked))
    assert sorted(r.changes.paths()[0] for r in asked if r.changes) == ["kid-0.txt", "kid-1.txt"]
    assert (work / "kid-0.txt").read_text() == "0" and (work / "kid-1.txt").read_text() == "1"
