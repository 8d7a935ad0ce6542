"""The notebooks' cells in a real kernel, answered with the comm messages a browser sends for clicks.

No browser: `NotebookKernel` plays JupyterLab's part (cells on the shell channel, widget state
from iopub, clicks as comm messages). The awaited cell keeps running while the clicks arrive,
which is what `ipykernel>=7.4` makes possible.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest

from tests.integration import widget_state as ws
from tests.integration.notebook_kernel import NotebookKernel
from tests.processes import is_gone

pytestmark = pytest.mark.timeout(240)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def code_cells(name: str) -> list[str]:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def kernel_env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("FREEACT_SUB_AUTO_APPROVE", "OPENAI_API_KEY"):
        env.pop(name, None)
    return env


def main_panel(kernel: NotebookKernel, run: str) -> str:
    (panel,) = ws.with_classes(kernel.models, "freeact-main", under=run)
    return panel


async def new_run(kernel: NotebookKernel, number: int = 1) -> tuple[str, str]:
    """The `number`th run panel of the kernel and its main agent's panel, once they are shown."""

    def shown() -> tuple[str, str] | None:
        runs = ws.runs(kernel.models)
        if len(runs) < number:
            return None
        main = ws.with_classes(kernel.models, "freeact-main", under=runs[number - 1])
        return (runs[number - 1], main[0]) if main else None

    return await kernel.until(shown, f"run number {number} to be shown")


async def test_parallel_subagents_answered_by_clicks(tmp_path: Path) -> None:
    shutil.copy(NOTEBOOKS / "parallel_subagents.ipynb", tmp_path)
    setup, start, run_cell, answer_cell, endings_cell, cleanup = code_cells("parallel_subagents.ipynb")
    assert "await view.run(" in run_cell

    async with NotebookKernel(tmp_path, kernel_env()) as kernel:
        models = kernel.models
        await kernel.run(setup)
        await kernel.run(start)
        request = kernel.execute(run_cell)
        run, main = await new_run(kernel)
        main_id = ws.agent_id(models, main)

        clicked: set[str] = set()

        async def approve_main(count: int, what: str) -> None:
            """Click `count` new Approve buttons of the main agent, shown at once."""
            buttons = await kernel.until(
                lambda: len(b := [i for i in ws.live_buttons(models, "approve", main_id) if i not in clicked]) == count
                and b,
                what,
            )
            for button in buttons:
                clicked.add(button)
                kernel.click(button)

        # the main agent's first cell
        await kernel.until(lambda: ws.panel_state(models, main) == "waiting for approval", "the main agent to wait")
        await approve_main(1, "the first approval")
        # its cell that calls MCP tools from code, then each call that cell makes, one after the other
        await approve_main(1, "the MCP-from-code cell's approval")
        await approve_main(1, "the first call from code")
        await approve_main(1, "the second call from code")
        # its three task calls
        await approve_main(3, "three task approvals")
        panels = await kernel.until(
            lambda: len(s := ws.subagent_panels(models, run)) == 3 and s, "three subagent panels"
        )
        # told apart by what they show, not by their order: a panel that starts while a question waits below its
        # task call is placed below that question (questions never move under the pointer)
        (reviewer,) = [p for p in panels if ">reviewer<" in ws.header(models, p)]
        primes = await kernel.until(
            lambda: next((p for p in panels if p != reviewer and "sieve" in ws.text(models, p)), None),
            "the primes subagent's cell",
        )
        (pi,) = [p for p in panels if p not in (reviewer, primes)]
        primes_id, pi_id = ws.agent_id(models, primes), ws.agent_id(models, pi)
        # the reviewer, a type on the Anthropic protocol, asks nothing: its rule allows its one MCP call
        await kernel.until(lambda: ws.panel_state(models, reviewer) == "done", "the reviewer to finish")
        header, shown = ws.header(models, reviewer), ws.text(models, reviewer)
        assert ">reviewer<" in header and ">Review the summary<" in header and ">claude-demo<" in header
        assert "by rule &#x27;demo_word_count&#x27;: allow" in shown and "freeact-decision-auto" in shown
        assert not ws.with_classes(models, "freeact-approve", under=reviewer)

        # the second subagent first: a standing decision from its panel approves its MCP call and its cell
        await kernel.until(lambda: ws.live_buttons(models, "approve", pi_id), "the pi subagent's approval panel")
        (toggle,) = ws.with_classes(models, "freeact-always-checkbox", f"freeact-by-{pi_id}")
        kernel.set_value(toggle, True)
        await kernel.until(lambda: ws.panel_state(models, pi) == "done", "the pi subagent to finish")
        assert not kernel.finished(request)  # the cell was awaiting all along

        # then the first subagent, which still waits: reject its cell
        (reject,) = await kernel.until(lambda: ws.live_buttons(models, "reject", primes_id), "the primes approval")
        await kernel.until(lambda: ws.panel_state(models, primes) == "waiting for approval", "the first to wait")
        kernel.click(reject)
        await kernel.until(lambda: kernel.finished(request), "the run cell to finish")

        assert ws.panel_state(models, main) == "done"
        assert ws.panel_state(models, primes) == "rejected"
        pi_text = ws.text(models, pi)
        assert "demo_constant" in pi_text and "RESULT: 3.14" in pi_text
        assert pi_text.count("freeact-decision-approved") == 1  # the call pending when the toggle was set
        assert pi_text.count("freeact-decision-auto") == 1  # the cell, decided by the standing decision
        approved = 'data-decision="approved"'
        own = ws.text(models, main).count(approved) - sum(ws.text(models, p).count(approved) for p in (primes, pi))
        assert own == 7, own  # the main agent's two cells, two calls from code and three tasks
        answer = await kernel.run(answer_cell)
        assert "not computed, the subagent's action was rejected" in answer and "π ≈ 3.14" in answer
        assert "(pi = 3.141593, e = 2.718282)" in answer and "The summary has 15 words" in answer
        endings = await kernel.run(endings_cell)
        assert f"{primes_id}: rejected" in endings and f"{pi_id}: done" in endings
        assert f"{ws.agent_id(models, reviewer)}: done after 2 turns" in endings
        await kernel.run(cleanup)


async def test_stop_button_cancels_a_running_cell(tmp_path: Path) -> None:
    shutil.copy(NOTEBOOKS / "quickstart.ipynb", tmp_path)
    cells = code_cells("quickstart.ipynb")
    setup, start, cleanup = cells[0], cells[1], cells[-1]

    async with NotebookKernel(tmp_path, kernel_env()) as kernel:
        models = kernel.models
        await kernel.run(setup)
        await kernel.run(start)
        request = kernel.execute('await view.run("Run something slow.")')
        run, main = await new_run(kernel)
        main_id = ws.agent_id(models, main)
        (approve,) = await kernel.until(lambda: ws.live_buttons(models, "approve", main_id), "the approval")
        kernel.click(approve)
        await kernel.until(lambda: "tick 2" in ws.text(models, main), "the slow cell's output")

        (stop,) = ws.with_classes(models, "freeact-stop", under=run)
        kernel.click(stop)
        await kernel.until(lambda: kernel.finished(request), "the cell to end after Stop")
        assert ws.panel_state(models, main) == "cancelled"
        assert models[stop]["disabled"] is True
        assert "tick 120" not in ws.text(models, main)
        printed = await kernel.run("print(type(view.events[-1]).__name__, agent.kernel is not None)")
        assert printed.split() == ["RunCancelled", "True"]  # the agent and its kernel are ready for more
        # the agent goes on with the next cell of the notebook as if nothing happened
        request = kernel.execute(cells[2])
        again, _ = await new_run(kernel, 2)
        (approve,) = await kernel.until(lambda: ws.live_buttons(models, "approve", main_id, under=again), "approval")
        kernel.click(approve)
        await kernel.until(lambda: kernel.finished(request), "the second run")
        assert ws.panel_state(models, main_panel(kernel, again)) == "done"
        assert "5050" in await kernel.run(cells[3])
        await kernel.run(cleanup)


async def test_view_shows_its_panel_and_a_replaced_agent_is_stopped(tmp_path: Path) -> None:
    shutil.copy(NOTEBOOKS / "quickstart.ipynb", tmp_path)
    setup, start = code_cells("quickstart.ipynb")[:2]
    async with NotebookKernel(tmp_path, kernel_env()) as kernel:
        await kernel.run(setup)
        await kernel.run(start)
        await kernel.run("agent.approvals.always_all()")
        await kernel.run('await view.run("Add up the numbers from 1 to 100 in one cell.")')
        (run,) = ws.runs(kernel.models)

        # `view` as a cell's value shows the run's panel again, and its static copy
        request = kernel.execute("view")
        await kernel.until(lambda: kernel.finished(request), "the cell")
        widget, static = kernel.displayed[request]
        assert widget["application/vnd.jupyter.widget-view+json"]["model_id"] == run
        assert "freeact-static" in static["text/html"] and "RESULT: 5050" in static["text/html"]

        # re-running the cell that creates the agent stops the old one, and says so
        old_id = ws.agent_id(kernel.models, main_panel(kernel, run))
        shown = await kernel.run("print(agent.kernel.pid, agent.tree.supplies.zygote.pid or '')")
        pids = [int(p) for p in shown.split()]
        printed = await kernel.run(start)
        assert f"Stopped {old_id}: no name of the notebook holds it any more" in printed
        assert all([await is_gone(pid, wait=10) for pid in pids])
        # the new agent is untouched, and a name that still holds an agent keeps it running (the notebook's cell
        # makes the agent; its first `view.run` would start it)
        await kernel.run("await agent.start()")
        printed = await kernel.run("keep = agent\nagent = None\nprint(keep.started)")
        assert printed.split() == ["True"]
        await kernel.run("await keep.stop()")


async def test_text_typed_key_by_key_reaches_the_kernel_while_a_cell_awaits(tmp_path: Path) -> None:
    """ipywidgets' front end sends a text box's next keystroke only after the kernel's idle for the last one; a comm
    message handled while an async cell awaits must get that idle, or every key after the first waits for the cell."""
    shutil.copy(NOTEBOOKS / "quickstart.ipynb", tmp_path)
    setup, start = code_cells("quickstart.ipynb")[:2]
    async with NotebookKernel(tmp_path, kernel_env()) as kernel:
        await kernel.run(setup)
        await kernel.run(start)  # an AgentView, as in every notebook that shows a run
        await kernel.run("import asyncio, ipywidgets\nbox = ipywidgets.Text()\nbox.add_class('probe')\ndisplay(box)")
        (box,) = ws.with_classes(kernel.models, "probe")
        request = kernel.execute(
            "for _ in range(600):\n    if box.value == 'Please stop':\n        break\n    await asyncio.sleep(0.05)\n"
            "print(repr(box.value))"
        )
        await kernel.until(lambda: ("busy", request) in kernel.statuses, "the awaiting cell to start")
        await kernel.type_text(box, "Please stop")
        assert not kernel.finished(request)  # every key arrived while the cell awaited
        await kernel.until(lambda: kernel.finished(request), "the cell to see the whole text", 30)
        assert kernel.printed[request].strip() == "'Please stop'"
        # after each key's idle the kernel says `busy` for the cell again (JupyterLab's indicator stays busy)
        during = kernel.statuses[kernel.statuses.index(("busy", request)) + 1:]
        assert during[-1] == ("idle", request), during
        keys = during[:-1]
        assert len(keys) == 2 * len("Please stop"), keys
        assert all(state == "idle" and parent != request for state, parent in keys[::2]), keys
        assert all(status == ("busy", request) for status in keys[1::2]), keys


async def test_a_subshell_asked_for_while_a_run_awaits_leaves_the_kernel_shown_busy(tmp_path: Path) -> None:
    """JupyterLab asks for a kernel subshell on the control channel when a cell shows its first widget; the kernel's
    `idle` for that request made the status bar say Idle while `await view.run(...)` still ran (issue 40, item 36)."""
    shutil.copy(NOTEBOOKS / "quickstart.ipynb", tmp_path)
    setup, start = code_cells("quickstart.ipynb")[:2]
    async with NotebookKernel(tmp_path, kernel_env()) as kernel:
        await kernel.run(setup)
        await kernel.run(start)
        request = kernel.execute('await view.run("Add up the numbers from 1 to 100 in one cell.")')
        run, _ = await new_run(kernel)
        asked = kernel.control("create_subshell_request")
        await kernel.until(lambda: ("idle", asked) in kernel.statuses, "the subshell request's idle")
        await kernel.until(lambda: kernel.statuses[-1][1] != asked, "a status after the subshell request's idle")
        after = kernel.statuses[kernel.statuses.index(("idle", asked)) + 1]
        assert after == ("busy", request), kernel.statuses  # the cell still runs, and the kernel says so
        (stop,) = ws.with_classes(kernel.models, "freeact-stop", under=run)
        kernel.click(stop)
        await kernel.until(lambda: kernel.finished(request), "the stopped run's cell to end")
        await kernel.run("await agent.stop()\nserver.close()")
