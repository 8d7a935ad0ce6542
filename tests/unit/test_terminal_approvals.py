"""The approval desk: one question at a time, in arrival order, answered by keys from a real pseudo-terminal."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from rich.console import Console

from freeact_sub import ApprovalPolicy, ApprovalRequest
from freeact_sub.terminal.approvals import ApprovalDesk
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

    async def asked(self, agent_id: str) -> None:
        while self.desk.question is None or f"[{agent_id}]" not in self.desk.question.plain:  # noqa: ASYNC110
            await asyncio.sleep(0.01)


@pytest.fixture
async def desk() -> AsyncIterator[Desk]:
    master, slave = os.openpty()
    output = io.StringIO()
    palette = Palette()
    renderer = Renderer(Console(file=output, width=120), palette, SubagentBoard(palette), main_id="agent-0000")
    policy = ApprovalPolicy()
    try:
        with KeyReader(slave) as keys:
            desk = ApprovalDesk(renderer, palette, policy, keys)
            task = asyncio.create_task(desk.run())
            yield Desk(desk, policy, output, master)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    finally:
        os.close(master)
        os.close(slave)


def _request(agent_id: str, code: str) -> ApprovalRequest:
    return ApprovalRequest(
        agent_id=agent_id, tool_name="execute_ipython_cell", tool_args={"code": code}, tool_call_id=code
    )


async def test_questions_come_in_arrival_order_and_always_covers_that_agents_queued_requests(desk: Desk) -> None:
    first_a, first_b, second_a = _request("agent-aaaa", "1"), _request("agent-bbbb", "2"), _request("agent-aaaa", "3")
    for request in (first_a, first_b, second_a):
        desk.desk.submit(request)
    await desk.asked("agent-aaaa")
    assert "Run this code?" in desk.desk.question.plain and "[a]lways for agent-aaaa" in desk.desk.question.plain
    desk.type(b"a")
    assert await first_a.approved() is True
    assert await second_a.approved() is True  # queued behind agent-bbbb's request, approved at once by "always"
    assert not first_b.decided
    assert desk.policy.is_approved("agent-aaaa") and not desk.policy.is_approved("agent-bbbb")
    await desk.asked("agent-bbbb")
    desk.type(b"n")
    assert await first_b.approved() is False
    shown = desk.output.getvalue()
    assert "auto-approved (standing decision)" in shown and "rejected" in shown


async def test_all_agents_from_now_on(desk: Desk) -> None:
    first, other = _request("agent-aaaa", "1"), _request("agent-bbbb", "2")
    desk.desk.submit(first)
    desk.desk.submit(other)
    await desk.asked("agent-aaaa")
    desk.type(b"A")
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
