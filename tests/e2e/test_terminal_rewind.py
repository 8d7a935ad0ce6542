"""`/rewind` in the real `freeact-sub --demo` terminal: the list of turns with the files each changed, then
`/rewind N` restores the bytes a cell wrote through Python's `csv` module and a subprocess, and says so.

A pseudo-terminal, the scripted demo model over HTTP, a real kernel; the demo's "write files" script.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from terminal_driver import Terminal

pytestmark = pytest.mark.timeout(300)


def test_rewind_lists_the_turns_and_restores_the_files(workdir: Path) -> None:
    (workdir / "notes.txt").write_bytes(b"my own notes\n")
    term = Terminal("--demo", "--auto-approve", cwd=workdir)
    try:
        term.expect_started()
        term.send("write files please\r")
        term.expect(r"Wrote `?report\.csv`? and a line")
        term.expect(r"you ›")
        assert (workdir / "notes.txt").read_bytes() == b"my own notes\nrainfall table written\n"
        assert (workdir / "report.csv").exists()
        term.send("/rewind\r")
        row = term.expect(r"\n *(\d+) │ [^│]+│ 1\. of “write files please” *│ ([^\n]*)")
        assert "notes.txt" in row.group(2) and "report.csv" in row.group(2)
        term.send(f"/rewind {row.group(1)}\r")
        term.expect(rf"Rewound to checkpoint {row.group(1)}: \d+ path\(s\) restored")
        term.expect(r"the kernel was restarted")
        term.expect(r"you ›")
        assert (workdir / "notes.txt").read_bytes() == b"my own notes\n"
        assert not (workdir / "report.csv").exists()
        term.send("\x04")
        assert term.wait_exit() == 0
    finally:
        term.kill()
