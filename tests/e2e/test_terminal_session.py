"""The interactive `freeact-sub --demo` session in a real pseudo-terminal, against the scripted model server.

Real kernels, a real MCP server, pydantic-ai's real OpenAI and Anthropic providers over HTTP: a
person's view of the main agent, its cell that calls MCP tools from code, and three parallel
subagents (one a `reviewer` on the Anthropic protocol), with approvals answered per agent.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from terminal_driver import AGENT, Terminal, processes_in, wait_until_gone

from freeact_sub.demo import DEMO_MCP_SERVER
from freeact_sub.terminal.approvals import BURST_GAP

pytestmark = pytest.mark.timeout(600)

PRIMES = "Count the prime"
PI = "Estimate pi"
REVIEW = "Review the summary"  # the reviewer's title: its task call's description


@pytest.fixture
def demo(workdir: Path) -> Iterator[Terminal]:
    """`freeact-sub --demo` in a terminal, killed after the test if it is still running."""
    term = Terminal("--demo", cwd=workdir)
    try:
        yield term
    finally:
        term.kill()


def _ready(term: Terminal, tools: str = "demo_constant, demo_word_count") -> str:
    """Wait for the banner (its MCP tools line: `tools`) and the prompt; returns the main agent's id."""
    term.expect(r"scripted demo model")
    main = term.expect(rf"({AGENT}) \(main\)").group(1)
    term.expect(r"agent types +built-in general, explore, plan, review")
    term.expect(r"reviewer · anthropic:claude-demo · Reviews a short text")  # the demo's type, on another protocol
    term.expect(rf"MCP tools +{tools} +│")  # the demo server's tools, no built-in ones
    term.expect(r"sandbox +workspace \(writes: working folder; network[;)]")  # the default, enforced
    term.expect(r"you ›")
    return main


def ctrl_d_exits_leaving_nothing(term: Terminal, workdir: Path) -> None:
    """Ctrl-D at the empty prompt ends the program with 0, and no process of its runs in `workdir` any more."""
    term.send("\x04")
    assert term.wait_exit() == 0
    assert processes_in(workdir) == []


def _start_tour(term: Terminal, main: str) -> None:
    """Send the tour's prompt and approve the main agent's actions up to its three subagents."""
    term.send("show me what you can do\r")
    _approve(term, main, "Run this code?")  # the image
    _approve(term, main, "Run this code?")  # the cell that calls MCP tools from code …
    _approve(term, main, "Call demo_constant?")  # … once per call it makes
    _approve(term, main, "Call demo_constant?")
    for _ in range(3):
        _approve(term, main, "Start this subagent?")


def _approve(term: Terminal, agent: str, question: str, key: str = "y") -> None:
    term.expect(rf"\[{agent}\] {re.escape(question)}  \[y\]es")  # selected: the keys answer it
    term.send(key)
    term.expect(rf"{agent} +(✓ approved|✗ rejected)")


def _tour(
    term: Terminal, main: str, answers: dict[str, dict[str, str]], *, output_while_asking: bool = False
) -> dict[str, str]:
    """Run the tour, answering each subagent question from `answers[job][tool]`; returns {job: agent id}.

    The reviewer asks nothing: its type's rule allows its one MCP call.

    With `output_while_asking`, the second subagent's question is answered only once the first
    (approved) subagent's result line has been rendered below it: output keeps coming while a question waits.
    """
    start = term.position
    _start_tour(term, main)
    ids = {
        PRIMES: term.wait_for(rf"started ({AGENT}) +{PRIMES}", since=start).group(1),
        PI: term.wait_for(rf"started ({AGENT}) +{PI}", since=start).group(1),
        REVIEW: term.wait_for(rf"started ({AGENT}) reviewer +{REVIEW}", since=start).group(1),
    }
    jobs = {agent: job for job, agent in ids.items()}
    pending = sum(len(tools) for tools in answers.values())
    asked_first = None
    for _ in range(pending):
        asked = term.expect(rf"\[({AGENT})\] (Run this code\?|Call demo_constant\?)  \[y\]es")  # the selected one
        agent, tool = asked.group(1), "cell" if asked.group(2).startswith("Run") else "mcp"
        asked_first = asked_first or agent
        if output_while_asking and agent != asked_first:
            # rendered before this question is answered (it may come before or after the question appears:
            # a child that got a pre-opened MCP connection starts sooner than one that opens its own)
            term.wait_for(rf"{asked_first} +│ RESULT: ", since=start)
            term.expect(rf"\[{agent}\] ")  # and the question is still on screen
        term.send(answers[jobs[agent]].pop(tool))
        term.expect(rf"{agent} +(✓ approved|✗ rejected)")
    term.expect(rf"{main} +› Results")
    term.expect(r"you ›")
    return ids


def test_tour_shows_every_agent_with_its_id_and_colour_and_takes_answers_per_agent(
    demo: Terminal, workdir: Path
) -> None:
    term, main = demo, _ready(demo)
    first = _tour(term, main, {PRIMES: {"cell": "y"}, PI: {"mcp": "a"}}, output_while_asking=True)
    primes, pi, reviewer = first[PRIMES], first[PI], first[REVIEW]
    screen = term.text

    # every kind of event names its agent
    assert re.search(rf"{main} +thinks The user wants to see the whole flow", screen)
    assert re.search(rf"{main} +› Let me first check my kernel", screen)
    assert re.search(rf"{main} +→ ╭─ execute_ipython_cell", screen)
    image = re.search(rf"{main} +│ \[image saved: (\S+\.png)\]", screen)
    assert image and (workdir / image.group(1)).is_file()  # shown relative to the folder the CLI runs in
    # the cell that calls MCP tools as Python functions: each call asked for, named as coming from code
    assert re.search(r"│ from mcptools\.demo import constant", screen)
    assert len(re.findall(rf"{main} +→ ╭─ demo_constant  from code in its cell", screen)) == 2
    assert re.search(rf"{main} +│ reference values: pi = 3\.141593, e = 2\.718282", screen)
    assert re.search(rf"{main} +→ ╭─ task", screen)
    assert re.search(rf"{primes} +→ ╭─ execute_ipython_cell", screen)
    assert re.search(rf"{primes} +│ RESULT: 17984", screen)
    assert re.search(rf"{primes} +› There are 17984 primes", screen)
    assert re.search(rf"{pi} +→ ╭─ demo_constant", screen)  # the MCP call …
    assert re.search(rf"{pi} +← demo_constant → 3\.14159", screen)  # … and its result
    assert re.search(rf"{pi} +✓ approved, and always for {pi}", screen)
    assert re.search(rf"{pi} +→ ╭─ execute_ipython_cell +auto-approved", screen)  # "always" took effect, still shown
    assert not re.search(rf"\[{pi}\] Run this code\?", screen)
    assert re.search(rf"{pi} +│ RESULT: 3\.1\d+", screen)
    assert re.search(rf"{main} +■ {primes} done after \d+\.\d s, 2 turns", screen)
    assert re.search(rf"{main} +← result of {pi}", screen)
    # the typed child on the Anthropic protocol: labelled with its type, its MCP call allowed by its rule
    allowed = "auto-approved by rule 'demo_word_count': allow"
    assert re.search(rf"{reviewer} reviewer +→ ╭─ demo_word_count  {allowed}", screen)
    assert re.search(rf"{reviewer} reviewer +← demo_word_count → 15", screen)
    assert re.search(rf"{main} +■ {reviewer} reviewer done after \d+\.\d s, 2 turns", screen)
    results = screen.split(f"{main}      › Results")[-1]
    assert "There are 17984 primes below 200,000." in results
    assert "Review (reviewer, Anthropic protocol): The summary has 15 words" in results

    # the live status listed each subagent with state, elapsed time and turns used
    assert re.search(r"subagent +type +model +state +elapsed +turns +tokens +cost", screen)
    assert re.search(rf"{primes} +general +\S+ +[a-z ]+ +\d+\.\d s +\d/4 +[\d,]+", screen)
    assert re.search(rf"{pi} +general +\S+ +[a-z ]+ +\d+\.\d s +\d/5 +[\d,]+", screen)
    assert re.search(rf"{reviewer} +reviewer +claude-demo +[a-z ]+ +\d+\.\d s +\d/\d+ +[\d,]+", screen)

    # the main agent's thinking is shown dimmed; subagents' thinking never reaches the screen
    assert re.search(r"\x1b\[[0-9;]*\b2;3m[^\x1b]*The user wants to see the whole flow", term.raw)
    for hidden in ("A sieve of Eratosthenes up to", "First the reference value of pi", "Now the simulation",
                   "A summary for a newcomer should be short"):
        assert hidden not in screen

    # one colour per agent, the same on every line, different between agents
    colours: dict[str, set[str]] = {}
    for style, agent in re.findall(rf"\x1b\[([0-9;]+)m\[?({AGENT})", term.raw):
        colours.setdefault(agent, set()).add(style)
    assert {agent: len(styles) for agent, styles in colours.items()} == {main: 1, primes: 1, pi: 1, reviewer: 1}
    assert len({next(iter(s)) for s in colours.values()}) == 4

    # a second tour: the other answers, and new subagents start without standing decisions
    second = _tour(term, main, {PRIMES: {"cell": "n\r"}, PI: {"mcp": "y", "cell": "y"}})  # n, Enter: no reason
    assert set(second.values()).isdisjoint(first.values())
    after = term.text[len(screen) :]
    assert re.search(rf"{second[PRIMES]} +✗ rejected", after)
    assert re.search(rf"{main} +■ {second[PRIMES]} rejected", after)
    assert "not computed, the subagent's action was rejected" in after
    assert re.search(rf"{second[PI]} +› π ≈ 3\.1", after)

    # "A": every agent, for the rest of the session
    term.send("one cell\r")
    term.expect(rf"\[{main}\] Run this code\?")
    term.send("A")
    term.expect(r"Approve every agent's actions, for the rest of the session\?")  # A asks to confirm
    time.sleep(2 * BURST_GAP)  # a y typed in one burst with the A would be left out
    term.send("y")
    term.expect(rf"{main} +✓ approved, and always for every agent")
    term.expect(r"The sum of 1 to 100 is 5050")
    term.send("one cell again\r")
    term.expect(rf"{main} +→ ╭─ execute_ipython_cell +auto-approved")
    term.expect(r"The sum of 1 to 100 is 5050")
    term.expect(r"you ›")

    ctrl_d_exits_leaving_nothing(term, workdir)


def test_the_person_answers_the_second_question_first_and_rejects_the_first_with_a_reason(
    demo: Terminal, workdir: Path
) -> None:
    term, main = demo, _ready(demo)
    _start_tour(term, main)

    # both subagents wait at once: a numbered list, the oldest question selected
    question = r"(Run this code\?|Call demo_constant\?)"
    listed = term.expect(
        rf"2 questions wait · 1–2 or Tab picks one, y/n/a/A answers it, s stops its subagent *\n"
        rf"› 1 \[({AGENT})\] {question}  \[y\]es.*\n"
        rf"  2 \[({AGENT})\] {question}  "
    )
    first, first_question, second, second_question = listed.groups()
    term.send("2")
    term.expect(rf"  1 \[{first}\] .*\n› 2 \[{second}\] {re.escape(second_question)}  \[y\]es")
    term.send("y")
    term.expect(rf"{second} +✓ approved")

    # the second agent runs while the first still waits
    if second_question.startswith("Run"):
        term.expect(rf"{second} +│ RESULT: ")
    else:
        term.expect(rf"{second} +← demo_constant → 3\.14")
    term.wait_for(rf"\[{first}\] {re.escape(first_question)}  \[y\]es", since=term.position)
    assert not re.search(rf"{first} +[✓✗]", term.text)

    # n asks for a reason; the rejected agent's model receives it and goes on
    term.send("n")
    term.expect(rf"\[{first}\] Reject\. Reason for the model \(Enter alone rejects without one, Esc goes back\)")
    time.sleep(2 * BURST_GAP)  # typed once its line is there: keys in one burst with the n are left out
    term.send("use the math module\r")
    term.expect(rf"{first} +✗ rejected, the model is told: use the math module")
    term.wait_for(rf"{first} +› I stopped: .*use the math module", since=term.position)
    if second_question.startswith("Call"):  # the π subagent goes on to its simulation
        _approve(term, second, "Run this code?")
    term.expect(rf"{main} +› Results")
    term.expect(r"you ›")

    ctrl_d_exits_leaving_nothing(term, workdir)


def test_s_stops_one_subagent_and_the_turn_goes_on_then_a_background_question_is_answered_between_turns(
    demo: Terminal, workdir: Path
) -> None:
    term, main = demo, _ready(demo)
    _start_tour(term, main)
    asked = term.expect(rf"(?:› 1 )?\[({AGENT})\] .*\[A\]ll agents  \[s\]top ({AGENT})")
    first = asked.group(1)
    assert asked.group(2) == first  # the key names the subagent it stops
    term.send("s")
    term.expect(rf"{first} +✗ stopping this subagent; its parent is told and goes on")
    term.expect(rf"{main} +■ {first} cancelled")
    # the other subagent's questions are answered as they come; the main agent's turn goes on to its answer
    while True:
        shown = term.expect(rf"(\[({AGENT})\] [^\n]*\?  \[y\]es|{main} +› Results)")
        if shown.group(2) is None:
            break
        assert shown.group(2) != first
        term.send("y")
        term.expect(rf"{shown.group(2)} +✓ approved")
    term.expect(r"you ›")

    # the same session goes on: a background subagent's question is answered at the prompt between turns
    term.send("count some words in the background\r")
    _approve(term, main, "Start this subagent?")
    term.expect(rf"{main} +› It runs in the background")
    # the turn is over; the subagent asks while the prompt waits, above it
    asked = term.expect(rf"({AGENT}) waits for your answer: /y approves, /n \[reason\] rejects, /s stops it")
    child = asked.group(1)
    assert child != main
    term.send("/y\r")
    term.expect(rf"{child} +✓ approved")
    term.expect(rf"{child} +│ RESULT: 10")
    term.expect(rf"{main} +■ {child} done")
    term.send("any news from the background?\r")
    term.expect(rf"{main} +› The background subagent has ended\. It reported: The sentence has 10 words\.")
    term.expect(r"you ›")
    ctrl_d_exits_leaving_nothing(term, workdir)


def test_ctrl_c_cancels_a_running_cell_and_running_subagents_then_ctrl_c_exits(workdir: Path) -> None:
    # the demo's own MCP server is served over HTTP by the demo model server's thread (no process to count): the
    # same tools over stdio as well, so that each agent's server is a process that must be gone after the cancel
    (workdir / "mcp.json").write_text(json.dumps({"mcpServers": {"stdio": DEMO_MCP_SERVER}}), encoding="utf-8")
    term = Terminal("--demo", "--mcp-config", "mcp.json", cwd=workdir)
    try:
        _ctrl_c_cancels_cells_and_subagents(term, workdir)
    finally:
        term.kill()


def _ctrl_c_cancels_cells_and_subagents(term: Terminal, workdir: Path) -> None:
    main = _ready(term, tools="demo_constant, demo_word_count, stdio_constant, stdio_word_count")
    term.send("slow\r")
    _approve(term, main, "Run this code?")
    term.expect(rf"{main} +│ tick 3\b")
    term.send("\x03")
    term.expect(r"Cancelling")
    term.expect(rf"{main} +✗ turn cancelled")
    term.expect(r"Cancelled\. The conversation keeps this prompt and what finished")
    term.expect(r"you ›")
    # a failing model request ends the turn with a message, and the session goes on
    term.send("cause a model error\r")
    term.expect(r"The turn failed: .*asked to fail")
    term.expect(r"you ›")
    # the kernel was interrupted, not left running the minute-long loop: the next cell runs at once
    term.send("one cell\x1b\rplease\r")  # Alt-Enter adds a line, Enter sends
    term.expect(r"you › one cell\s*\n\.+ please")
    _approve(term, main, "Run this code?")
    term.expect(r"The sum of 1 to 100 is 5050", timeout=40)
    term.expect(r"you ›")

    # cancel while the subagents run and one of them waits for an answer
    _start_tour(term, main)
    term.expect(rf"\[{AGENT}\] (Run this code\?|Call demo_constant\?)")
    assert len(_demo_mcp_servers(term)) >= 2  # the main agent's and at least one subagent's
    term.send("\x03")
    term.expect(rf"{main} +■ {AGENT} cancelled")
    term.expect(rf"{main} +✗ turn cancelled")
    term.expect(r"you ›")
    # the subagents were stopped: left are the main agent's server and the one idle in the MCP pool (mcp_pool_size=1)
    assert len(_demo_mcp_servers(term)) <= 2

    term.send("\x03")  # Ctrl-C at the empty prompt exits
    assert term.wait_exit() == 0
    assert processes_in(workdir) == []


def _demo_mcp_servers(term: Terminal) -> list[psutil.Process]:
    found = []
    for process in term.descendants():
        try:
            if DEMO_MCP_SERVER["args"][-1] in process.cmdline():
                found.append(process)
        except psutil.Error:
            continue
    return wait_until_gone(found, timeout=0) if found else []
