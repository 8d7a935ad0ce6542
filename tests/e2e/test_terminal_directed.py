"""The person's own directed turns and messages in the real terminal (`freeact-sub --demo` in a pseudo-terminal):
a command file run as `/name args` (as `@type prompt` is), `/help` listing both, `/send` to a background subagent,
a bad command file named in the error, and the person's instructions and skills in the banner, `/skills` and
`/help`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from terminal_driver import AGENT, Terminal, cli_env, processes_in

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def demo(workdir: Path, tmp_path: Path) -> Iterator[Terminal]:
    commands = workdir / ".freeact-sub" / "commands"
    commands.mkdir(parents=True)
    (commands / "primes.md").write_text(
        "---\ndescription: Count the primes below a number\nagent: general\n---\nCount the primes $ARGUMENTS.\n",
        encoding="utf-8")
    own = tmp_path / "home" / ".config" / "freeact-sub"  # the person's own instructions and skill
    (own / "skills" / "tidy-data").mkdir(parents=True)
    (own / "AGENTS.md").write_text("Answer briefly.\n", encoding="utf-8")
    (own / "skills" / "tidy-data" / "SKILL.md").write_text(
        "---\nname: tidy-data\ndescription: Tidy a table before analysing it.\n---\nOne row per observation.\n",
        encoding="utf-8")
    term = Terminal("--demo", cwd=workdir, env=cli_env(HOME=str(tmp_path / "home")))
    try:
        yield term
    finally:
        term.kill()


def _approve(term: Terminal, agent: str, question: str) -> None:
    term.expect(rf"\[{agent}\] {re.escape(question)}  \[y\]es")
    term.send("y")
    term.expect(rf"{agent} +✓ approved")


def _directed_primes(term: Terminal, main: str, line: str) -> None:
    term.send(line + "\r")
    _approve(term, main, "Start this subagent?")  # the person's own task call is asked as the model's would be
    child = term.expect(rf"{main} +\+ started ({AGENT})").group(1)
    _approve(term, child, "Run this code?")
    term.expect(rf"{main} +← result of {child}")
    term.expect(r"There are \d+ primes below 200,000")
    term.expect(r"you ›")


def test_at_type_a_command_help_send_and_a_bad_command_file(demo: Terminal, workdir: Path) -> None:
    term = demo
    term.expect(r"scripted demo model")
    main = term.expect(rf"({AGENT}) \(main\)").group(1)
    term.expect(r"instructions +~/\.config/freeact-sub/AGENTS\.md")  # the banner names what it read
    term.expect(r"skills +tidy-data · /skills lists them")
    term.expect(r"you ›")
    term.send("/skills\r")
    term.expect(r"tidy-data +~/\.config/freeact-sub/skills/tidy-data +Tidy a table before analysing it\.")
    term.send("/help\r")
    term.expect(r"/send AGENT-ID TEXT: send a message to a running subagent")
    term.expect(r"@TYPE PROMPT: run an agent type as your own subagent \(general, explore, plan, review, reviewer\)")
    term.expect(r"/primes \[as @general\]: Count the primes below a number")
    term.expect(r"Instructions read: ~/\.config/freeact-sub/AGENTS\.md\. Skills: 1 \(/skills lists them\)\.")

    _directed_primes(term, main, "/primes below 200,000")  # `@general …` runs the same way (test_terminal_oneshot)

    term.send("count some words in the background\r")
    _approve(term, main, "Start this subagent?")
    term.expect(rf"{main} +› It runs in the background")
    child = term.expect(rf"({AGENT}) waits for your answer: /y approves").group(1)
    term.send(f"/send {child} count in French please\r")
    term.expect(rf"{main} +→ message from you to {child}: count in French please")
    term.send("/send agent-0000 hello\r")
    term.expect(r"Not sent: no running subagent 'agent-0000'")
    term.send("/y\r")
    term.expect(rf"{child} +› I read your message \('count in French please'\) and finish here\.")
    term.expect(rf"{main} +■ {child} done")

    (workdir / ".freeact-sub" / "commands" / "bad.md").write_text("---\nagnt: general\n---\nx\n", encoding="utf-8")
    term.send("/help\r")
    term.expect(r"These command files are left out:")  # each bad file named with its field; the others still work
    # (a long temporary path may wrap the line: between two words a break and its indent are allowed)
    term.expect(r"\S*bad\.md: agnt: unknown field \(use description, agent,[\s│]+model\)")
    term.send("\x04")
    assert term.wait_exit() == 0
    assert processes_in(workdir) == []


def test_a_line_typed_ahead_is_sent_when_the_prompt_is_up(workdir: Path) -> None:
    """Enter typed while the kernel starts (or between two prompts) stays Enter: the line is sent, not left as a
    draft behind a `.....` continuation line (the terminal used to turn it into Ctrl-J, the prompt's new line)."""
    term = Terminal("--demo", "--auto-approve", cwd=workdir)
    try:
        term.expect(r"starting the model, the kernel and MCP servers")
        term.send("one cell\r")  # typed before the prompt is there, or while the agent starts behind it
        term.expect(r"RESULT: 5050")
        term.expect(r"you › ")
        term.send("one cell\r")  # and once more, between two prompts
        term.expect(r"RESULT: 5050")
        assert "....." not in term.text
        term.expect(r"you › ")
        term.send("\x04")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    assert processes_in(workdir) == []
