"""The notebooks in `notebooks/` run headless, unchanged, with `FREEACT_SUB_AUTO_APPROVE=1`.

nbclient executes every cell in a real kernel against the offline demo model and saves the
widgets' final state in the notebook, which is what these tests read.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.cli_fork import ForkedKernelManager
from tests.integration import widget_state as ws

pytestmark = pytest.mark.timeout(240)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
AUTO_APPROVE_NOTE = "Auto-approve is on (FREEACT_SUB_AUTO_APPROVE=1)"


def execute(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> nbformat.NotebookNode:
    """Run a copy of `notebooks/<name>` in `tmp_path` (images and state land there, not in the repository)."""
    copy = tmp_path / name
    shutil.copy(NOTEBOOKS / name, copy)
    monkeypatch.setenv("FREEACT_SUB_AUTO_APPROVE", "1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    notebook = nbformat.read(copy, as_version=4)
    client = NotebookClient(
        notebook, timeout=180, kernel_name="python3", kernel_manager_class=ForkedKernelManager,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute(env=dict(os.environ))
    return notebook


def stream_text(notebook: nbformat.NotebookNode) -> list[str]:
    """The printed output of each code cell."""
    return [
        "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        for cell in notebook.cells
        if cell.cell_type == "code"
    ]


def widgets(notebook: nbformat.NotebookNode) -> ws.Models:
    saved = notebook.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"]
    return {model_id: model["state"] for model_id, model in saved.items()}


def test_the_notebooks_mark_the_one_line_to_switch_to_a_real_provider() -> None:
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        source = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        marked = [line for line in source.splitlines() if "REAL PROVIDER" in line]
        assert len(marked) == 1 and marked[0].startswith("config = demo_config("), path.name


def test_every_notebook_is_tested() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == [
        "parallel_subagents.ipynb", "quickstart.ipynb", "subagents_from_code.ipynb"]


def test_quickstart_runs_headless(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notebook = execute("quickstart.ipynb", tmp_path, monkeypatch)
    printed = "\n".join(stream_text(notebook))
    assert AUTO_APPROVE_NOTE not in printed  # said once, by the run's banner, not also by a printed line
    assert "The sum of 1 to 100 is **5050**." in printed  # `print(view.answer)` after the first run
    assert "There are 17984 primes below 200,000." in printed  # the background run, awaited later

    # nbclient records widget messages only while the cell that caused them runs, so the saved state
    # of the background run stops where its cell returned; the first run's state is complete.
    models = widgets(notebook)
    first = ws.runs(models)[0]
    assert ws.with_classes(models, "freeact-auto-approve", under=first)
    (main,) = ws.with_classes(models, "freeact-main", under=first)
    assert ws.panel_state(models, main) == "done"
    shown = ws.text(models, first)
    assert "RESULT: 5050" in shown  # the cell's output
    assert "<strong>5050</strong>" in shown  # the final answer, rendered from Markdown
    assert "auto-approved" in shown and "waiting for approval" not in shown

    # the finished run also left a static copy in its cell, for a notebook reopened without a kernel
    run_cell = next(c for c in notebook.cells if c.cell_type == "code" and "await view.run(" in c.source)
    (static,) = [o for o in run_cell.outputs if "freeact-static" in o.get("data", {}).get("text/html", "")]
    html = static.data["text/html"]
    assert "RESULT: 5050" in html and "<strong>5050</strong>" in html and "auto-approved" in html
    assert "<button" not in html and "<script" not in html
    assert "The sum of 1 to 100 is 5050." in static.data["text/plain"]
    assert static.data["text/plain"].count(AUTO_APPROVE_NOTE) == 1
    (live,) = [o for o in run_cell.outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert live.data["text/plain"] == ""  # what an untrusted notebook shows in the widget's place
    plain = [o.data.get("text/plain", "") for c in notebook.cells for o in c.get("outputs", []) if "data" in o]
    assert not [text for text in plain if "JupyterLab" in text]


def test_parallel_subagents_runs_headless(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notebook = execute("parallel_subagents.ipynb", tmp_path, monkeypatch)
    printed = stream_text(notebook)
    assert not any(AUTO_APPROVE_NOTE in text for text in printed)  # the banner says it
    answer = next(text for text in printed if "## Results" in text)
    assert "17984 primes" in answer and "π ≈ 3.14" in answer
    assert "(pi = 3.141593, e = 2.718282)" in answer  # the main agent's cell that called MCP tools from code
    assert "**Review (`reviewer`, Anthropic protocol):** The summary has 15 words" in answer

    models = widgets(notebook)
    (run,) = ws.runs(models)
    (main,) = ws.with_classes(models, "freeact-main", under=run)
    subagents = ws.subagent_panels(models, run)
    ids = [ws.agent_id(models, p) for p in subagents]
    assert len(set(ids)) == 3 and ws.agent_id(models, main) not in ids
    # each subagent panel is nested under one of the main agent's task calls, in call order
    calls = ws.with_classes(models, "freeact-call", under=main)
    heads = {c: models[ws.children(models[c])[0]] for c in calls}  # the title, or a cell's title row with Copy
    titles = {c: head.get("value") or models[ws.children(head)[0]]["value"] for c, head in heads.items()}
    task_calls = [c for c in calls if ">task</span>" in titles[c]]
    assert [ws.subagent_panels(models, c) for c in task_calls] == [[p] for p in subagents]
    assert [ws.panel_state(models, p) for p in (main, *subagents)] == ["done"] * 4
    # the run's timeline: a lane per agent under the run, and the same in the static copy a reopened notebook shows
    (line,) = ws.with_classes(models, "freeact-timeline", under=run)
    drawn = models[line]["value"]
    assert drawn.count('class="fs-tl-lane"') == 4 and 'data-state="running_code"' in drawn
    run_cell = next(c for c in notebook.cells if c.cell_type == "code" and "await view.run(" in c.source)
    (static,) = [o for o in run_cell.outputs if "freeact-static" in o.get("data", {}).get("text/html", "")]
    assert static.data["text/html"].count('class="fs-tl-lane"') == 4
    # the main agent's MCP calls from code: shown with the cell that made them, answered
    (cell,) = [c for c in calls if "reference values: pi = 3.141593, e = 2.718282" in ws.text(models, c)]
    shown = ws.text(models, cell)
    assert "from mcptools.demo import constant" in re.sub(r"<[^>]+>", "", shown)  # the code, highlighted
    assert shown.count('freeact-call-title">demo_constant<') == 2  # each call, inside the cell that made it
    # the headers say each subagent's type, title and model: the reviewer runs on the Anthropic protocol
    headers = [ws.header(models, p) for p in subagents]
    assert all('class="freeact-type">general<' in h and ">freeact-sub-demo<" in h for h in headers[:2])
    assert 'class="freeact-type">reviewer<' in headers[2] and ">Review the summary<" in headers[2]
    assert 'class="freeact-model">claude-demo<' in headers[2]
    # every agent's kernel ran under the default sandbox, and each header says so; the reviewer has no kernel
    assert all(re.search(r'class="freeact-sandbox"[^>]*>sandbox: workspace[ <]', h)
               for h in [ws.header(models, main), *headers[:2]])
    assert "freeact-sandbox" not in headers[2]
    assert "by rule &#x27;demo_word_count&#x27;: allow (agent type reviewer)" in ws.text(models, subagents[2])
    # how each subagent ended, as the notebook prints it from `view.events` (primes: 2 turns, pi: 3, review: 2)
    endings = next(text for text in printed if "turns" in text)
    assert f"{ids[0]}: done after 2 turns" in endings and f"{ids[1]}: done after 3 turns" in endings
    assert f"{ids[2]}: done after 2 turns" in endings


def test_subagents_from_code_runs_headless_with_the_batch_inside_its_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notebook = execute("subagents_from_code.ipynb", tmp_path, monkeypatch)
    printed = "\n".join(stream_text(notebook))
    assert "one question for 4 subagents: Count the letters of the word {word!r}." in printed
    assert "4 subagents done" in printed
    assert "**kernel** 6, **subagent** 8, **approval** 8, **sandbox** 7." in printed

    models = widgets(notebook)
    (run,) = ws.runs(models)
    (main,) = ws.with_classes(models, "freeact-main", under=run)
    calls = ws.with_classes(models, "freeact-call", under=main)
    (cell,) = [c for c in calls if "map_tasks" in ws.text(models, c) and "execute_ipython_cell" in ws.text(models, c)]
    shown = ws.text(models, cell)
    assert "Job for each subagent of a batch" in shown and "a batch of 4 subagents" in shown  # the one question
    assert len(ws.subagent_panels(models, cell)) == 4  # each child's panel inside the cell that started it
    (card,) = ws.with_classes(models, "freeact-batch", under=cell)  # one card for the batch, a row per child
    assert len(ws.with_classes(models, "freeact-batch-row-view", under=card)) == 4
    assert "Row 1 of 4, as its subagent reads it" in shown and "4/4</b> · 4 done" in ws.text(models, card)
    assert [ws.panel_state(models, p) for p in ws.subagent_panels(models, run)] == ["done"] * 4
