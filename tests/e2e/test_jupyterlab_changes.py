"""JupyterLab in a real browser: a person decides a child's change set in the notebook, file by file.

A notebook (written here) runs an agent on a scripted model (`tests/scripting.py`, in the notebook's own kernel):
the main agent starts a child with `isolation: copy-on-write`, the child's cell changes `report.csv`, adds
`plot.txt` and removes `old.csv`, and while it ends the person changes `report.csv` in the folder too. The
`apply_changes` question shows a diff per file with a checkbox, the conflict marked; the person unticks
`plot.txt` and approves: the removal is applied, the report's version is kept beside the person's (no base to
merge against), and `plot.txt` stays out. The panel is photographed for
docs/isolation.md (`test-artifacts/isolation-apply-notebook.png`, copied to `docs/` by hand when it changes).

Same server and browser fixtures as `test_jupyterlab.py` (Debian's Chromium; skipped without it unless `CI`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_jupyterlab import (  # noqa: F401 -- fixtures
    ARTIFACTS,
    MINUTE,
    ROOT,
    JupyterLab,
    chromium,
    jupyterlab,
    page,
    run_all_cells,
    wait_for_a_settled_kernel,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

SETUP = '''import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from freeact_sub import Agent, AgentConfig
from freeact_sub.notebook import AgentView
from tests.scripting import Call, Router, Script

work = Path({work!r})
work.mkdir(exist_ok=True)
(work / "report.csv").write_text("region,sales\\nnorth,120\\nsouth,95\\n")
(work / "old.csv").write_text("stale\\n")
CHILD = """
open('report.csv', 'a').write('east,143\\\\n')
open('plot.txt', 'w').write('sales by region\\\\n')
import os; os.remove('old.csv')
"""

def meanwhile(messages):  # the person edits the report while the subagent works: a conflict, shown
    text = (work / "report.csv").read_text()
    (work / "report.csv").write_text(text.replace("region,sales", "region,sales_eur"))
    return ["Updated the report."]

main = Script([Call("task", {{"prompt": "EDITOR add the east region", "description": "Add the east region",
                              "isolation": "copy-on-write"}})], ["The report has the east region now."])
router = Router({{"MAIN": main, "EDITOR": Script([Call("execute_ipython_cell", {{"code": CHILD}})], meanwhile)}})
agent = Agent(AgentConfig(model=router.model, working_dir=work, kernel_pool_size=0, mcp_pool_size=0,
                          save_sessions=False))
view = AgentView(agent)'''


def _notebook(path: Path, work: Path) -> None:
    cells = [
        SETUP.format(root=str(ROOT), work=str(work)),
        'await view.run("MAIN update the report")',
        "await agent.stop()",
    ]
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": f"c{n}",
                "metadata": {},
                "outputs": [],
                "source": source,
            }
            for n, source in enumerate(cells)
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook))


def test_a_change_set_is_decided_file_by_file_in_jupyterlab(jupyterlab: JupyterLab, page) -> None:  # noqa: F811
    from playwright.sync_api import expect

    work = jupyterlab.root_dir / "project"
    _notebook(jupyterlab.root_dir / "changes.ipynb", work)
    page.goto(f"{jupyterlab.url}/lab/tree/changes.ipynb?token={jupyterlab.token}")
    notebook = page.locator(".jp-NotebookPanel:visible")
    expect(notebook).to_have_count(1, timeout=2 * MINUTE)
    page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").click()
    wait_for_a_settled_kernel(jupyterlab)
    run_all_cells(page, notebook)

    live = notebook.locator(".freeact-live")
    main = live.locator(".freeact-panel.freeact-main")
    expect(main).to_have_count(1, timeout=2 * MINUTE)
    main_id = main.locator(".freeact-id").first.inner_text()
    approve = notebook.locator(f"button.freeact-approve.freeact-by-{main_id}:not([disabled])")
    expect(approve).to_have_count(1, timeout=2 * MINUTE)
    approve.click()  # the task call
    child = live.locator(".freeact-panel.freeact-subagent")
    expect(child).to_have_count(1, timeout=MINUTE)
    child_id = child.locator(".freeact-id").first.inner_text()
    notebook.locator(f"button.freeact-approve.freeact-by-{child_id}:not([disabled])").click()  # its cell

    changes = main.locator(".freeact-changes")
    expect(changes).to_have_count(1, timeout=2 * MINUTE)
    files = changes.locator(".freeact-change-file")
    expect(files).to_have_count(3)
    expect(changes).to_contain_text("it changed in the folder too since the subagent started")
    expect(changes).to_contain_text("+east,143")
    changes.locator(".freeact-change-file").filter(has_text="plot.txt").locator("input").uncheck()
    call = changes.locator("xpath=..")  # the call: its code, the files, the buttons
    call.evaluate("element => element.scrollIntoView({block: 'center'})")  # clear of the run's sticky header
    call.screenshot(path=str(ARTIFACTS / "isolation-apply-notebook.png"))
    approve.click()
    expect(main.locator(".freeact-state").first).to_have_text("done", timeout=2 * MINUTE)
    # the person's edit was made outside any change set, so there is no base to merge against: the folder's version
    # stays, and the child's is kept beside it, named in the result
    assert (work / "report.csv").read_text() == "region,sales_eur\nnorth,120\nsouth,95\n"
    (beside,) = work.glob("report.agent-*.csv")
    assert beside.read_text() == "region,sales\nnorth,120\nsouth,95\neast,143\n"
    assert not (work / "old.csv").exists()
    assert not (work / "plot.txt").exists()  # left out by the person
