"""The approval desk: waiting questions as a numbered list, answered in any order by keys from a real pty."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
from rich.console import Console

from freeact_sub import ApprovalPolicy, ApprovalRequest
from freeact_sub.terminal.approvals import BURST_GAP, ApprovalDesk
from freeact_sub.terminal.keys import KeyReader
from freeact_sub.terminal.palette import Palette
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.status import SubagentBoard


@dataclass
class Desk:
    desk: ApprovalDesk
    policy: ApprovalPolicy
    output: io.StringIO
    keyboard: int
    """The pty's master side: bytes written here are keys typed."""

    def type(self, keys: bytes) -> None:
        os.write(self.keyboard, keys)

    @property
    def screen(self) -> str:
        """The questions as the live view shows them."""
        view = self.desk.view()
        if view is None:
            return ""
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(view)
        return console.export_text()

    async def asked(self, agent_id: str) -> None:
        """Wait until the selected question (the one with the answer keys) is `agent_id`'s."""
        while f"[{agent_id}] " not in self.selected_line:  # noqa: ASYNC110
            await asyncio.sleep(0.01)

    @property
    def selected_line(self) -> str:
        return next((line for line in self.screen.splitlines() if "[y]es" in line or "Reason" in line), "")


@contextlib.asynccontextmanager
async def running_desk(width: int = 120, stop: Callable[[str], bool] | None = None) -> AsyncIterator[Desk]:
    """An `ApprovalDesk` reading keys from a pty, running until the block ends."""
    master, slave = os.openpty()
    output = io.StringIO()
    palette = Palette()
    renderer = Renderer(Console(file=output, width=width), palette, SubagentBoard(palette), main_id="agent-0000")
    policy = ApprovalPolicy()
    try:
        with KeyReader(slave) as keys:
            desk = ApprovalDesk(renderer, palette, policy, stop=stop)
            task = asyncio.create_task(desk.run(keys))
            yield Desk(desk, policy, output, master)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    finally:
        os.close(master)
        os.close(slave)


@pytest.fixture
async def desk() -> AsyncIterator[Desk]:
    async with running_desk() as running:
        yield running


def _request(agent_id: str, code: str) -> ApprovalRequest:
    return ApprovalRequest(
        agent_id=agent_id, tool_name="execute_ipython_cell", tool_args={"code": code}, tool_call_id=code
    )


async def test_the_oldest_question_is_selected_and_always_covers_that_agents_waiting_requests(desk: Desk) -> None:
    first_a, first_b, second_a = _request("agent-aaaa", "1"), _request("agent-bbbb", "2"), _request("agent-aaaa", "3")
    for request in (first_a, first_b, second_a):
        desk.desk.submit(request)
    await desk.asked("agent-aaaa")
    assert "Run this code?" in desk.selected_line and "[a]lways for agent-aaaa" in desk.selected_line
    desk.type(b"a")
    assert await first_a.approved() is True
    assert await second_a.approved() is True  # queued behind agent-bbbb's request, approved at once by "always"
    assert not first_b.decided
    assert desk.policy.is_approved("agent-aaaa") and not desk.policy.is_approved("agent-bbbb")
    await desk.asked("agent-bbbb")
    desk.type(b"n\r")  # n, then Enter without a reason: a bare rejection
    assert await first_b.approved() is False
    assert first_b.reason is None
    shown = desk.output.getvalue()
    assert "auto-approved (standing decision)" in shown and "rejected" in shown


async def test_all_agents_from_now_on(desk: Desk) -> None:
    first, other = _request("agent-aaaa", "1"), _request("agent-bbbb", "2")
    desk.desk.submit(first)
    desk.desk.submit(other)
    await desk.asked("agent-aaaa")
    desk.type(b"A")  # asks to confirm first
    while "Approve every agent's actions" not in desk.screen:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    await asyncio.sleep(2 * BURST_GAP)  # a y in the same burst as the A would be left out
    assert not first.decided
    desk.type(b"y")
    assert await first.approved() and await other.approved()
    assert desk.policy.everything
    later = _request("agent-cccc", "3")
    desk.desk.submit(later)
    assert await later.approved() is True


async def test_keys_typed_before_the_question_and_escape_sequences_are_not_answers(desk: Desk) -> None:
    desk.type(b"y")  # typed ahead, before anything was asked
    await asyncio.sleep(0.1)
    request = _request("agent-aaaa", "1")
    desk.desk.submit(request)
    await desk.asked("agent-aaaa")
    desk.type(b"\x1b[A")  # the up arrow: its "A" must not approve every agent
    desk.type(b"x")  # not an answer
    await asyncio.sleep(0.1)
    assert not request.decided
    desk.type(b"y")
    assert await request.approved() is True
    assert not desk.policy.everything


async def test_one_question_is_one_line_and_several_are_a_numbered_list(desk: Desk) -> None:
    first = _request("agent-aaaa", "x = 1\nprint(x)")
    desk.desk.submit(first)
    await desk.asked("agent-aaaa")
    assert desk.screen.strip() == "[agent-aaaa] Run this code?  [y]es  [n]o  [a]lways for agent-aaaa  [A]ll agents"
    desk.desk.submit(_request("agent-bbbb", "\n\nimport math\nmath.pi"))
    lines = desk.screen.strip().splitlines()
    assert lines[0] == "2 questions wait · 1–2 or Tab picks one, y/n/a/A answers it"
    assert lines[1].startswith("› 1 [agent-aaaa] Run this code?  [y]es")
    assert lines[2] == "  2 [agent-bbbb] Run this code?  import math"  # not selected: what it would run, in brief


async def test_the_person_answers_the_second_question_first_and_the_first_still_waits(desk: Desk) -> None:
    slow, quick = _request("agent-aaaa", "1"), _request("agent-bbbb", "2")
    desk.desk.submit(slow)
    desk.desk.submit(quick)
    await desk.asked("agent-aaaa")
    desk.type(b"2")
    await desk.asked("agent-bbbb")
    desk.type(b"y")
    assert await quick.approved() is True
    await asyncio.sleep(0.1)
    assert not slow.decided
    assert desk.desk.pending == [slow]
    assert desk.screen.startswith("[agent-aaaa] Run this code?  [y]es")  # back to the single line
    # Tab moves the selection along the list, wrapping around
    third = _request("agent-cccc", "3")
    desk.desk.submit(third)
    desk.type(b"\t")
    await desk.asked("agent-cccc")
    desk.type(b"\t")
    await desk.asked("agent-aaaa")
    desk.type(b"9")  # no question 9: the selection stays
    desk.type(b"y")
    assert await slow.approved() is True
    assert not third.decided
    decisions = re.findall(r"(agent-\w+) +✓ approved", desk.output.getvalue())
    assert decisions == ["agent-bbbb", "agent-aaaa"]


async def test_a_new_question_does_not_take_the_selection_away(desk: Desk) -> None:
    first, second = _request("agent-aaaa", "1"), _request("agent-bbbb", "2")
    desk.desk.submit(first)
    desk.desk.submit(second)
    desk.type(b"2")
    await desk.asked("agent-bbbb")
    desk.desk.submit(_request("agent-cccc", "3"))  # arrives just before the person presses y
    desk.type(b"y")
    assert await second.approved() is True
    assert not first.decided


async def test_n_asks_for_a_reason_that_the_rejection_carries(desk: Desk) -> None:
    request = _request("agent-aaaa", "import os; os.system('ls')")
    desk.desk.submit(request)
    await desk.asked("agent-aaaa")
    desk.type(b"n")
    while "Reason for the model" not in desk.selected_line:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    await asyncio.sleep(2 * BURST_GAP)  # the reason is typed once its line is there, not in one burst with the n
    desk.type("use pathlib, not os.systemX\x7f — schön".encode())  # backspace removes the X
    while "schön" not in desk.selected_line:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    assert not request.decided
    desk.type(b"\r")
    assert await request.approved() is False
    assert request.reason == "use pathlib, not os.system — schön"
    shown = desk.output.getvalue()
    assert re.search(r"agent-aaaa +✗ rejected, the model is told: use pathlib, not os.system — schön", shown)


async def test_esc_leaves_the_reason_and_the_keys_answer_again(desk: Desk) -> None:
    request = _request("agent-aaaa", "1")
    desk.desk.submit(request)
    await desk.asked("agent-aaaa")
    desk.type(b"n")
    await asyncio.sleep(2 * BURST_GAP)
    desk.type(b"yx\x7f")  # part of the reason, not an answer; backspace takes the x away
    while not desk.selected_line.rstrip().endswith("Esc goes back): y▏"):  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    desk.type(b"z\x1b")  # keys and Esc in one read (as a fast typist or tmux sends them)
    while "[y]es" not in desk.selected_line:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    assert not request.decided
    desk.type(b"y")
    assert await request.approved() is True


async def test_shift_tab_goes_back_and_other_escape_sequences_are_ignored(desk: Desk) -> None:
    requests = [_request(agent, agent) for agent in ("agent-aaaa", "agent-bbbb", "agent-cccc")]
    for request in requests:
        desk.desk.submit(request)
    await desk.asked("agent-aaaa")
    desk.type(b"\x1b[Z")  # Shift-Tab from the first wraps to the last
    await desk.asked("agent-cccc")
    desk.type(b"\x1b[1;5A\x1bOB\x1by\x1b[Z")  # Ctrl-Up, Down (SS3), Alt-y, then Shift-Tab: only Shift-Tab counts
    await desk.asked("agent-bbbb")
    desk.type(b"y")
    assert await requests[1].approved() is True
    assert not requests[0].decided and not requests[2].decided


async def test_a_request_decided_elsewhere_leaves_the_list(desk: Desk) -> None:
    first, second = _request("agent-aaaa", "1"), _request("agent-bbbb", "2")
    desk.desk.submit(first)
    desk.desk.submit(second)
    await desk.asked("agent-aaaa")
    first.approve(False)  # e.g. the turn was cancelled
    await desk.asked("agent-bbbb")
    assert desk.desk.waiting == 1
    second.approve(True)
    assert desk.desk.view() is None


async def test_when_input_ends_every_waiting_and_later_request_is_rejected() -> None:
    master, slave = os.openpty()
    palette = Palette()
    renderer = Renderer(Console(file=io.StringIO()), palette, SubagentBoard(palette), main_id="agent-0000")
    desk = ApprovalDesk(renderer, palette, ApprovalPolicy())
    waiting = _request("agent-aaaa", "1")
    desk.submit(waiting)
    try:
        with KeyReader(slave) as keys:
            task = asyncio.create_task(desk.run(keys))
            os.close(master)  # the terminal went away
            await asyncio.wait_for(task, 5)
    finally:
        os.close(slave)
    assert await waiting.approved() is False
    later = _request("agent-bbbb", "2")
    desk.submit(later)
    assert await later.approved() is False


async def test_a_desk_without_a_running_turn_takes_requests_and_keys_from_any_front_end() -> None:
    palette = Palette()
    output = io.StringIO()
    renderer = Renderer(Console(file=output, width=120), palette, SubagentBoard(palette), main_id="agent-0000")
    desk = ApprovalDesk(renderer, palette, ApprovalPolicy())
    assert desk.press("y") is False  # nothing asked: a key is not an answer to a later question
    first, second = _request("agent-aaaa", "1"), _request("agent-bbbb", "2")
    desk.submit(first)  # e.g. a background subagent while the prompt waits
    desk.submit(second)
    assert desk.waiting == 2 and "agent-aaaa" in output.getvalue()  # what it would run is shown on arrival
    assert desk.press("\t") is False
    assert desk.selected is second
    for key in "nno\r":
        desk.press(key)
    assert second.decided and second.reason == "no"
    assert desk.selected is first and not first.decided


async def test_s_stops_the_subagent_that_asks_and_its_questions_leave_the_list() -> None:
    stopped: list[str] = []
    main, child, again, other = (_request("agent-0000", "0"), _request("agent-aaaa", "1"),
                                 _request("agent-aaaa", "2"), _request("agent-bbbb", "3"))
    async with running_desk(width=160, stop=lambda agent: stopped.append(agent) or True) as desk:
        output = desk.output
        desk.desk.submit(main)
        await desk.asked("agent-0000")
        assert "[s]top" not in desk.selected_line  # the main agent is not a subagent: nothing to stop
        assert "s stops its subagent" not in desk.screen
        desk.type(b"s")  # not an answer to the main agent's question
        await asyncio.sleep(0.1)
        assert not main.decided and stopped == []
        desk.type(b"y")
        assert await main.approved() is True
        for request in (child, again, other):
            desk.desk.submit(request)
        await desk.asked("agent-aaaa")
        assert desk.screen.splitlines()[0].endswith("y/n/a/A answers it, s stops its subagent")
        assert desk.selected_line.rstrip().endswith("[A]ll agents  [s]top agent-aaaa")
        desk.type(b"s")
        await desk.asked("agent-bbbb")  # both of agent-aaaa's questions left; agent-bbbb's is selected
        assert stopped == ["agent-aaaa"]
        assert desk.desk.pending == [other] and not other.decided
        assert re.search(r"agent-aaaa +✗ stopping this subagent; its parent is told and goes on", output.getvalue())
        desk.desk.submit(_request("agent-0000", "4"))
        desk.type(b"2")  # the main agent's question selected: the header offers no stop
        await desk.asked("agent-0000")
        assert desk.screen.splitlines()[0].endswith("y/n/a/A answers it")


async def test_an_arrow_key_split_across_two_reads_answers_nothing(desk: Desk) -> None:
    """`\\x1b[` in one read and `A` in the next is the Up key, never `A` (approve every agent)."""
    request = _request("agent-aaaa", "1")
    desk.desk.submit(request)
    await desk.asked("agent-aaaa")
    desk.type(b"\x1b[")
    await asyncio.sleep(0.01)  # the terminal sends the rest a moment later: a separate read
    desk.type(b"A")
    desk.type(b"\x1bOB")  # Down in application mode, and Alt+a: dropped too
    desk.type(b"\x1ba")
    await asyncio.sleep(0.3)
    assert not request.decided and not desk.policy.everything
    desk.type(b"y")
    assert await request.approved() is True and not desk.policy.everything


async def test_a_lone_escape_still_reaches_the_question() -> None:
    master, slave = os.openpty()
    try:
        with KeyReader(slave) as keys:
            os.write(master, b"\x1b")
            assert await asyncio.wait_for(keys.get(), 2) == "\x1b"
            os.write(master, "\x15ü\x7f\r".encode())
            typed = [await asyncio.wait_for(keys.get(), 2) for _ in range(4)]
            assert typed[:3] == ["\x15", "ü", "\x7f"] and typed[3] in ("\r", "\n")  # the pty may map CR to LF
    finally:
        os.close(master)
        os.close(slave)


async def test_typing_meant_for_the_prompt_answers_nothing(desk: Desk) -> None:
    """`Also` does not approve every agent, `nice, and then` is no rejection with a reason, and letters that
    answer nothing get one hint (issue 28, item 15)."""
    request = _request("agent-aaaa", "1")
    desk.desk.submit(request)
    await desk.asked("agent-aaaa")
    for key in b"Also\r":  # typed at human speed, a key every 60 ms
        desk.type(bytes([key]))
        await asyncio.sleep(0.06)
    await asyncio.sleep(2 * BURST_GAP)
    assert not request.decided and not desk.policy.everything
    assert "Approve every agent's actions" in desk.screen and "[left out, typed with the key before: lso" in desk.screen
    desk.type(b"x")  # not y: back to the question
    while "Not approved for every agent" not in desk.output.getvalue():  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    assert "Approve every agent's actions" not in desk.screen and "[y]es" in desk.selected_line
    for key in b"nice, and then\r":
        desk.type(bytes([key]))
        await asyncio.sleep(0.06)
    await asyncio.sleep(2 * BURST_GAP)
    assert not request.decided
    assert "Reason for the model" in desk.selected_line and "ice, and then" not in desk.selected_line.split("]")[-1]
    desk.type(b"\x1b")  # Esc: back to the question
    while "[y]es" not in desk.selected_line:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    await asyncio.sleep(2 * BURST_GAP)
    desk.type(b"hello")
    await asyncio.sleep(0.2)
    assert desk.output.getvalue().count("answers nothing: y, n, a or A answer") == 1 and not request.decided
    desk.type(b"n\r")  # n and Enter at once: the bare rejection it always was
    assert await request.approved() is False and request.reason is None
