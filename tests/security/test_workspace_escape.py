"""A process in a copy-on-write view (as an isolated child's kernel is) cannot write the real folder by any name.

It is confined by the sandbox's own script with the plan an isolated kernel gets; a host process whose working
folder is the real one stands by, so `/proc/<pid>/cwd` points at the folder beneath the view.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from freeact_sub.sandbox import ENFORCE_SCRIPT
from freeact_sub.sandbox.views import copy_on_write_platform_problem
from freeact_sub.workspaces import Workspace, read_changes

pytestmark = pytest.mark.skipif(copy_on_write_platform_problem() is not None,
                                reason=f"no copy-on-write views here: {copy_on_write_platform_problem()}")

ATTEMPTS = r"""
import json, os, sys
host_pid, upper, real = sys.argv[1], sys.argv[2], sys.argv[3]
tries = {
    "proc_cwd_of_host": f"/proc/{host_pid}/cwd/escaped.txt",
    "proc_root_of_host": f"/proc/{host_pid}/root{real}/escaped.txt",
    "upper_directly": os.path.join(upper, "escaped.txt"),
    "own_proc_cwd": "/proc/self/cwd/inside.txt",
}
found = {}
for name, path in tries.items():
    try:
        with open(path, "w") as file:
            file.write("x")
        found[name] = "written"
    except OSError as exc:
        found[name] = f"errno {exc.errno}"
print(json.dumps(found))
"""


def test_the_real_folder_and_the_workspace_are_out_of_reach_from_inside_the_view(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    (tmp_path / "ws").mkdir()
    workspace = Workspace.create(tmp_path / "ws", folder)
    plan = {"deny": [], "write": [str(folder)], "network": False, "scratch": str(tmp_path),
            "overlay": workspace.plan()}
    host = subprocess.Popen(["sleep", "60"], cwd=folder)
    try:
        done = subprocess.run(
            [sys.executable, ENFORCE_SCRIPT, json.dumps(plan), "--", sys.executable, "-c", ATTEMPTS,
             str(host.pid), str(workspace.upper), str(folder)],
            cwd=folder, check=True, capture_output=True, text=True,
        )
    finally:
        host.kill()
        host.wait()
    found = json.loads(done.stdout)
    assert found["own_proc_cwd"] == "written"  # writing the view works, and lands in the workspace
    assert {name: value for name, value in found.items() if value == "written"} == {"own_proc_cwd": "written"}
    assert sorted(p.name for p in folder.iterdir()) == []
    changes = read_changes(workspace.upper, folder)
    assert [c.path for c in changes.changes] == ["inside.txt"]
