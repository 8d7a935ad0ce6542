"""A `map_tasks` batch in the real `freeact-sub --demo` terminal at 80 columns: the question shows the first row
filled in, the rows print nothing of their own (one progress line while they run, one summary line at the end), and
`/batch` lists each row. (`tests/integration/test_batch_views.py` counts the lines of a batch of 50 at 80 and 160.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from terminal_driver import AGENT, Terminal

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def narrow(workdir: Path) -> Iterator[Terminal]:
    term = Terminal("--demo", cwd=workdir, columns=80)
    try:
        yield term
    finally:
        term.kill()


def test_a_batch_at_80_columns_is_one_question_one_summary_and_a_table_on_demand(narrow: Terminal) -> None:
    term = narrow
    term.expect_started()
    term.send("one subagent per row\r")
    main = term.expect(rf"\[({AGENT})\] Run this code\?").group(1)
    term.send("y")
    term.expect(rf"{main} +✓ approved")
    start = term.position
    term.expect(r"row 1 of 4: Count the letters of the word 'kernel'\.")  # the worked example, in the question
    term.expect(rf"\[{main}\] Start these 4 subagents\?")
    term.send("y")
    summary = term.expect(rf"{main}  ■ batch of 4 ended in [\d.]+ s: 4 done · 0 failed · [\d,]+ tokens")
    rows = term.text[start : summary.end()]
    assert "started agent-" not in rows and "result of agent-" not in rows, "no row prints lines of its own"
    term.expect(r"4 subagents, one per row, counted")
    term.expect(r"you ›")
    term.send("/batch\r")
    term.expect(r"batch of 4 · Count the letters of the word \{word!r\}\. · 4 done")
    rows = [term.expect(rf"\n( +{number} +done +{AGENT} [^\n]*)").group(1) for number in range(1, 5)]
    assert all(len(line) <= 80 for line in rows) and all(re.search(r"\{\"word\"", line) for line in rows), rows
