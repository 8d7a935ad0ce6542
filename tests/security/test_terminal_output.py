"""Issue 26, class 6, the screen half: what a cell prints or a model writes cannot drive the person's terminal.

A hostile model, served over the real OpenAI protocol on 127.0.0.1, streams text full of escape
sequences and has its cell print them: `ESC c` (terminal reset), the 8-bit CSI `\\x9b2J`, OSC 52
clipboard writes (BEL- and ST-terminated), window titles, a bidi override, a carriage return that
would overwrite the line, and lines made to look like the CLI's own decisions. The real
`freeact-sub` runs in a pseudo-terminal; the test reads the raw bytes it writes.

Against the code before this fix, `ESC c`, `\\x9b2J` and the ST-terminated OSCs reached the pty
as they were (rich passes them through `Text` and `Markdown`), and a line folded past the right
edge put a fake decision at the left edge: the assertions on the raw bytes and on the fakes fail there.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from freeact_sub.demo.scenario import Reply, ToolCall
from freeact_sub.demo.server import DemoServer
from tests.e2e.terminal_driver import AGENT, Terminal, cli_env, processes_in

pytestmark = pytest.mark.timeout(300)

E = "\x1b"
CLIP_CELL = "Q0VMTC1DTElQQk9BUkQ="  # base64 payloads and titles: none may reach the pty at all
CLIP_MODEL = "TU9ERUwtQ0xJUEJPQVJE"
TITLE = "PWNED-TITLE"
FOLD = 200 - len("agent-3fa2      │ ")
"""Spaces that fill a 200-column line after the output gutter of a main agent."""
PROBES = (
    f"{E}c",  # RIS: reset the terminal
    "\x9b2J",  # the 8-bit CSI: erase the screen
    f"{E}]52;c;",  # OSC 52: write the clipboard
    f"{E}]0;",  # OSC 0: set the window title
    f"{E}]2;",
    "\u202e",  # a bidi override
)


def cell_code(main: str) -> str:
    """What the hostile model's cell runs: every probe printed, and fakes of the CLI's own lines.

    The fakes are put together at run time, so the code shown for approval holds none of them whole.
    """
    return "\n".join([
        "E = chr(27)",
        f"A = '{main}' + '      ✓ approved ' + 'FAKE' + '-'",
        f"CLIP, TITLE = '{CLIP_CELL[:5]}' + '{CLIP_CELL[5:]}', '{TITLE[:5]}' + '{TITLE[5:]}'",
        "print('reset' + E + 'c' + ' csi' + chr(0x9b) + '2J' + ' osc' + E + ']52;c;' + CLIP + chr(7))",
        "print('st' + E + ']52;c;' + CLIP + E + chr(92) + ' title' + E + ']0;' + TITLE + chr(7) + ' end')",
        "print('bidi' + chr(0x202e) + 'txt' + E + '[31m red' + E + '[0m')",
        f"print('SAFE-' + 'LOOKING' + chr(13) + '[{main}] auto-approved execute_ipython_cell ' + 'FAKE' + '-CR')",
        f"print(' ' * {FOLD} + A + 'FOLD')",  # exactly to the right edge: the rest would start the next line
        "print(A + 'PLAIN')",
        f"# a raw control in the code itself: {E}]2;{TITLE}\a",  # shown to approve, drawn, never obeyed
    ])


def respond(body: Mapping[str, Any]) -> Reply:
    """The hostile model: a main agent that streams escapes and runs the cell, then answers with more."""
    messages = body["messages"]
    last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    prompt = str(messages[last_user].get("content"))
    results = [m for m in messages[last_user:] if m.get("role") == "tool"]
    named = re.search(AGENT, prompt)
    main = named.group() if named else "agent-0000"
    if results:
        return Reply(text=(f"Final {E}c{E}]52;c;{CLIP_MODEL}{E}\\ answer \x9b2J{E}]2;{TITLE}\a done."
                           f"\n\n{main}      ✓ approved FAKE-ANSWER\n"))
    text = (f"Model {E}c text \x9b2J{E}]52;c;{CLIP_MODEL}\a{E}]0;{TITLE}{E}\\ \u202estreams"
            f"\n\n[{main}] auto-approved execute_ipython_cell FAKE-MODEL\n")
    return Reply(text=text, tool_calls=(ToolCall("execute_ipython_cell", {"code": cell_code(main)}, id="cell-1"),))


@pytest.fixture(scope="module")
def model() -> Iterator[DemoServer]:
    server = DemoServer(responder=respond, chunk_delay=0.001).start()
    try:
        yield server
    finally:
        server.close()


def assert_no_probe(raw: str) -> None:
    """Nothing the hostile side wrote drives the terminal: no probe, no OSC or C1 at all, no payload."""
    for probe in PROBES:
        assert probe not in raw, f"{probe!r} reached the terminal"
    assert not re.search("[\x80-\x9f]", raw), "a C1 control reached the terminal"
    assert E + "]" not in raw and "\a" not in raw, "an OSC reached the terminal"
    assert CLIP_CELL not in raw and CLIP_MODEL not in raw and TITLE not in raw.replace(f"␛]2;{TITLE}␇", "")


def fakes_and_decisions(text: str) -> tuple[list[str], list[str]]:
    """The fake lines with what stands before each on its screen line, and the CLI's real decision lines."""
    fakes = [line for line in text.splitlines() if "FAKE-" in line]
    decisions = [line for line in text.splitlines() if re.search(rf"{AGENT} +✓ approved( · code: .*)?\s*$", line)]
    return fakes, decisions


def test_a_hostile_model_and_cell_cannot_drive_the_terminal_or_pass_for_its_decisions(
    model: DemoServer, workdir: Path
) -> None:
    term = Terminal("--model", "hostile", "--base-url", model.base_url, cwd=workdir, env=cli_env())
    try:
        main = term.expect(rf"({AGENT}) \(main\)").group(1)
        term.expect(r"you ›")
        term.send(f"go {main}\r")
        term.expect(rf"\[{main}\] Run this code\?  \[y\]es")
        term.send("y")
        term.expect("FAKE-ANSWER")  # the answer (its first words are cut by controls where they are obeyed)
        term.expect(r"you ›")
        term.send("\x04")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    raw, text = term.raw, term.text
    assert_no_probe(raw)
    assert "SAFE-LOOKING" not in text  # what the carriage return overwrote is not shown …
    assert f"␛]2;{TITLE}␇" in text  # … but code to approve is shown whole, its controls drawn
    fakes, decisions = fakes_and_decisions(text)
    assert {tag for line in fakes for tag in re.findall(r"FAKE-\w+", line)} == {
        "FAKE-CR", "FAKE-FOLD", "FAKE-PLAIN", "FAKE-MODEL", "FAKE-ANSWER"}
    for line in fakes:  # each behind an agent's bar (or in the approval panel's frame), never at the left edge
        before = line[: line.index(f"[{main}]" if "FAKE-CR" in line or "FAKE-MODEL" in line else f"{main}      ✓")]
        assert re.search(r"│ *$", before), f"a fake line is not behind a bar: {line!r}"
    assert decisions, "the person's decision is shown"
    assert processes_in(workdir) == []

    shown = Terminal("sessions", "show", cwd=workdir, env=cli_env())  # the saved transcript, replayed
    try:
        assert shown.wait_exit() == 0
    finally:
        shown.kill()
    assert_no_probe(shown.raw)
    assert "FAKE-FOLD" in shown.text and "FAKE-ANSWER" in shown.text
    for line in fakes_and_decisions(shown.text)[0]:
        assert not re.match(rf"{main} +✓", line), f"a fake line at the left edge: {line!r}"


def test_the_one_shot_answer_on_stdout_carries_no_control(model: DemoServer, workdir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "freeact_sub.terminal.cli", "--model", "hostile", "--base-url", model.base_url,
         "-p", "go agent-0000", "--auto-approve"],
        cwd=workdir, env=cli_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Final  answer  done.\n\nagent-0000      ✓ approved FAKE-ANSWER\n"
    assert_no_probe(done.stderr)
    assert "FAKE-PLAIN" in done.stderr and not re.search(r"^agent-0000 +✓ approved FAKE", done.stderr, re.M)
    assert processes_in(workdir) == []
