"""`RewindPanel` in the notebook: a "Rewind to here" click restores what a cell wrote through Python's `csv`
module and a subprocess, byte for byte, cuts the conversation back and says so in the panel; the rewind's own
checkpoint is listed, and a click on it undoes the rewind. Real ipywidgets (`Button.click()` runs a browser
click's handlers), a real kernel, a scripted model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from freeact_sub import Agent
from freeact_sub.notebook import AgentView, RewindPanel
from tests.integration.test_rewind import WRITES
from tests.scripting import Call, Script, single_agent_config, until

pytestmark = pytest.mark.timeout(120)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


async def test_rewind_to_here_restores_the_files_and_a_second_click_undoes_it(workdir: Path) -> None:
    (workdir / "data.csv").write_bytes(b"name,n\r\na,1\r\n")
    (workdir / "notes.txt").write_bytes(b"first line\n")
    (workdir / "gone.txt").write_bytes(b"to be removed\n")
    before = _files(workdir)
    script = Script([Call("execute_ipython_cell", {"code": WRITES})], ["Written."])
    async with Agent(single_agent_config(script, workdir, auto_approve=True, kernel_pool_size=0)) as agent:
        view = AgentView(agent)
        await view.run("write the files")
        after = _files(workdir)
        panel = RewindPanel(agent)
        (first,) = [p for p in agent.checkpoints() if p.turn == 1]
        assert "notes.txt" in first.files
        panel.buttons[first.number].click()
        await until(lambda: panel.last is not None and not panel.busy, "the rewind a click started")
        assert _files(workdir) == before
        assert not (workdir / "out").exists() and agent.history == []
        assert "Rewound to checkpoint" in panel.status.value and "the kernel was restarted" in panel.status.value
        assert panel.last is not None
        undo = panel.last.undo
        assert undo in panel.buttons  # the rewind's own checkpoint is a row of the list
        panel.buttons[undo].click()
        await until(
            lambda: panel.last is not None and panel.last.checkpoint == undo and not panel.busy,
            "the undo a click started",
        )
        assert _files(workdir) == after
