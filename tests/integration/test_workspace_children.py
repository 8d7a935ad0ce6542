"""Children with a workspace of their own (`isolation: copy-on-write`), in real kernels under the real sandbox.

The child's writes (through code and a subprocess, and a removal) stay out of the folder while it runs, come back
as a change set in an `apply_changes` request, and land only once approved; ten children that all append to one
file lose nothing, where children that share the folder do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from freeact_sub import Agent, ApprovalRequest
from freeact_sub.sandbox import copy_on_write_problem
from tests.scripting import Call, Router, Script, configs, drive

pytestmark = pytest.mark.skipif(copy_on_write_problem() is not None,
                                reason=f"no copy-on-write views here: {copy_on_write_problem()}")

config = configs(kernel_pool_size=0, mcp_pool_size=0)

WRITES = (
    "import subprocess, os\n"
    "subprocess.run(['sh', '-c', 'echo from-a-subprocess > sub.txt'], check=True)\n"
    "os.remove('gone.txt')\n"
    "with open('shared.txt', 'a') as f:\n    f.write('child line\\n')\n"
    "os.makedirs('pkg', exist_ok=True)\n"
    "open('pkg/mod.py', 'w').write('X = 1\\n')\n"
    "print(sorted(os.listdir('.')))\n"
)


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != ".freeact-sub")  # the host's sessions are there


def _folder(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "gone.txt").write_text("old\n")
    (work / "shared.txt").write_text("first\n")
    return work


async def test_a_child_s_writes_stay_apart_until_its_change_set_is_approved(tmp_path: Path) -> None:
    work = _folder(tmp_path)
    seen_while_running: dict[str, Any] = {}

    def look(messages: Any) -> list[Any]:  # the child's second request: its cell has run, it has not ended
        seen_while_running["folder"] = _names(work)
        seen_while_running["shared"] = (work / "shared.txt").read_text()
        return ["written"]

    parent = Script([Call("task", {"prompt": "CHILD write", "isolation": "copy-on-write"}, id="t1")], ["done"])
    child = Script([Call("execute_ipython_cell", {"code": WRITES})], look)
    asked: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest) -> bool:
        if request.tool_name == "apply_changes":
            asked.append(request)
        return True

    async with Agent(config(Router({"PARENT": parent, "CHILD": child}).model, work)) as agent:
        await drive(agent.stream("PARENT go"), decide, limit=120)
    assert seen_while_running == {"folder": ["gone.txt", "shared.txt"], "shared": "first\n"}
    (request,) = asked
    assert request.changes is not None
    kinds = {change.path: change.kind for change in request.changes.changes}
    assert kinds == {"sub.txt": "added", "gone.txt": "removed", "shared.txt": "changed", "pkg/mod.py": "added"}
    diff = next(c.diff for c in request.changes.changes if c.path == "shared.txt")
    assert "+child line" in diff
    assert _names(work) == ["pkg", "shared.txt", "sub.txt"]
    assert (work / "shared.txt").read_text() == "first\nchild line\n"
    assert (work / "sub.txt").read_text() == "from-a-subprocess\n"
    result = parent.tool_results(1)["t1"]
    assert "applied to the working folder" in result and "sub.txt: applied" in result


async def test_a_rejected_change_set_leaves_the_folder_as_it_was_and_a_file_left_out_is_not_applied(
    tmp_path: Path,
) -> None:
    work = _folder(tmp_path)
    results = []
    for choice in ("reject", "pick"):
        parent = Script([Call("task", {"prompt": "CHILD write", "isolation": "copy-on-write"}, id="t1")], ["done"])
        child = Script([Call("execute_ipython_cell", {"code": WRITES})], ["written"])

        def decide(request: ApprovalRequest, choice: str = choice) -> bool:
            if request.tool_name != "apply_changes":
                return True
            assert request.changes is not None
            if choice == "reject":
                return False
            for change in request.changes.changes:
                change.apply = change.path == "sub.txt"  # the person's per-file choice
            return True

        async with Agent(config(Router({"PARENT": parent, "CHILD": child}).model, work)) as agent:
            await drive(agent.stream("PARENT go"), decide, limit=120)
        results.append(parent.tool_results(1)["t1"])
        if choice == "reject":
            assert _names(work) == ["gone.txt", "shared.txt"]
            assert (work / "shared.txt").read_text() == "first\n"
    assert "were not applied" in results[0] and "sub.txt" in results[0]
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


async def _ten_children(work: Path, isolation: str) -> list[ApprovalRequest]:
    count = 10
    calls = [Call("task", {"prompt": f"CHILD-{n} append", "isolation": isolation}, id=f"t{n}") for n in range(count)]
    scripts = {f"CHILD-{n} ": Script([Call("execute_ipython_cell", {"code": APPEND.format(n=n)})], ["ok"])
               for n in range(count)}
    asked: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest) -> bool:
        if request.tool_name == "apply_changes":
            asked.append(request)
        return True

    model = Router({"PARENT": Script(calls, ["done"]), **scripts}).model
    async with Agent(config(model, work, max_subagents=count)) as agent:
        await drive(agent.stream("PARENT go"), decide, limit=300)
    return asked


async def test_ten_parallel_children_that_append_to_one_file_lose_nothing_when_isolated(tmp_path: Path) -> None:
    isolated, shared = tmp_path / "isolated", tmp_path / "shared"
    for folder in (isolated, shared):
        folder.mkdir()
        (folder / "log.txt").write_text("header\n")
    asked = await _ten_children(isolated, "copy-on-write")
    lines = (isolated / "log.txt").read_text().splitlines()
    assert lines[0] == "header"
    # merged into log.txt, or (where a merge could not be sure) kept beside it, named in the result: never lost
    beside = {line for path in isolated.glob("log.agent-*.txt") for line in path.read_text().splitlines()}
    assert {f"line {n}" for n in range(10)} <= set(lines) | beside
    assert len(lines) == len(set(lines))  # and nothing doubled
    assert all((isolated / f"own-{n}.txt").read_text() == str(n) for n in range(10))
    assert len(asked) == 10
    # every set after the first met a folder that had changed since it started: shown, not silent
    assert sum(1 for r in asked for c in r.changes.changes if c.path == "log.txt" and c.conflict) >= 1  # type: ignore[union-attr]
    # the same children sharing the folder: each overwrote what the others wrote
    await _ten_children(shared, "shared")
    assert len((shared / "log.txt").read_text().splitlines()) < 11


async def test_children_started_from_code_can_have_workspaces_too(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    cell = ("from freeact_sub_tasks import map_tasks\n"
            "print(await map_tasks('KID-{} write', [0, 1], isolation='copy-on-write'))")
    parent = Script([Call("execute_ipython_cell", {"code": cell})], ["done"])
    kids = {f"KID-{n} ": Script([Call("execute_ipython_cell", {"code": f"open('kid-{n}.txt', 'w').write('{n}')"})],
                                ["ok"]) for n in range(2)}
    asked: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest) -> bool:
        if request.tool_name == "apply_changes":
            asked.append(request)
        return True

    async with Agent(config(Router({"PARENT": parent, **kids}).model, work)) as agent:
        await drive(agent.stream("PARENT go"), decide, limit=180)
    assert sorted(r.changes.paths()[0] for r in asked if r.changes) == ["kid-0.txt", "kid-1.txt"]
    assert (work / "kid-0.txt").read_text() == "0" and (work / "kid-1.txt").read_text() == "1"
