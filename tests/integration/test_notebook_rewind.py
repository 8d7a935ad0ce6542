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


SETUP = """
from pathlib import Path
from freeact_sub import Agent
from freeact_sub.demo import demo_config, start_demo_server
from freeact_sub.notebook import AgentView, RewindPanel

server = start_demo_server()
agent = Agent(demo_config(server, working_dir=Path.cwd(), auto_approve=True, kernel_pool_size=0, mcp_pool_size=0))
await agent.start()
await AgentView(agent).run("write files please")
panel = RewindPanel(agent)
panel
"""


async def test_a_click_sent_as_a_browser_sends_it_rewinds_in_the_notebooks_kernel(tmp_path: Path) -> None:
    from tests.integration import widget_state as ws
    from tests.integration.notebook_kernel import NotebookKernel
    from tests.integration.test_notebook_kernel import kernel_env

    (tmp_path / "notes.txt").write_bytes(b"my own notes\n")
    async with NotebookKernel(tmp_path, kernel_env()) as kernel:
        try:
            await kernel.run(SETUP, limit=90)
            assert (tmp_path / "report.csv").exists()
            first = ws.with_classes(kernel.models, "freeact-rewind")[0]  # turn 1 of the run: before it wrote
            kernel.click(first)
            await kernel.until(lambda: not (tmp_path / "report.csv").exists(), "the click's rewind", limit=60)
            assert (tmp_path / "notes.txt").read_bytes() == b"my own notes\n"
            await kernel.until(
                lambda: any("Rewound to checkpoint" in str(m.get("value", "")) for m in kernel.models.values()),
                "the panel to say what it did",
            )
        finally:
            await kernel.run("await agent.stop()\nserver.close()")
