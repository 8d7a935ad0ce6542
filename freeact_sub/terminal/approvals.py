"""Approval questions, asked one at a time in arrival order, each naming its agent.

Requests from parallel agents arrive interleaved in the one event stream. The stream consumer
only queues them; this desk runs in a task of its own, so output keeps rendering while a
question waits for a key. Answers: y (yes), n (no), a (always for this agent), A (always, for
every agent, for the rest of the session).
"""

from __future__ import annotations

import asyncio
from collections import deque

from rich.text import Text

from freeact_sub import ApprovalPolicy, ApprovalRequest

from .keys import KeyReader
from .palette import Palette
from .render import Renderer

__all__ = ["ApprovalDesk"]

_QUESTIONS = {
    "execute_ipython_cell": "Run this code?",
    "task": "Start this subagent?",
    "reset_kernel": "Reset the kernel?",
}


class ApprovalDesk:
    """Queues undecided requests and asks the person about each in turn."""

    def __init__(self, renderer: Renderer, palette: Palette, policy: ApprovalPolicy, keys: KeyReader | None) -> None:
        self._renderer = renderer
        self._palette = palette
        self._policy = policy
        self._keys = keys
        self._pending: deque[ApprovalRequest] = deque()
        self._arrived = asyncio.Event()
        self.question: Text | None = None
        """The question waiting for a key right now (shown at the bottom of the live view)."""

    def submit(self, request: ApprovalRequest) -> None:
        """Queue a request that needs a decision."""
        self._pending.append(request)
        self._arrived.set()

    @property
    def waiting(self) -> int:
        return len(self._pending) + (1 if self.question is not None else 0)

    async def run(self) -> None:
        """Ask about queued requests until cancelled."""
        while True:
            while not self._pending:
                self._arrived.clear()
                await self._arrived.wait()
            request = self._pending.popleft()
            if request.decided:
                continue
            if self._policy.is_approved(request.agent_id):
                self._approve_standing(request)
                continue
            self._renderer.show_request(request)
            try:
                answer = await self._ask(request)
            finally:
                self.question = None
                self._renderer.refresh()  # the answered question leaves the screen before the decision is printed
            self._decide(request, answer)

    async def _ask(self, request: ApprovalRequest) -> str:
        if self._keys is None:
            return "n"  # the CLI refuses to start without a terminal unless everything is auto-approved
        agent = request.agent_id
        self.question = Text.assemble(
            self._palette.tag(agent),
            f" {_QUESTIONS.get(request.tool_name, f'Call {request.tool_name}?')}  ",
            ("[y]", "bold"),
            "es  ",
            ("[n]", "bold"),
            "o  ",
            ("[a]", "bold"),
            "lways for ",
            self._palette.label(agent),
            "  ",
            ("[A]", "bold"),
            "ll agents",
        )
        self._keys.discard_typed_ahead()
        while True:
            key = await self._keys.get()
            if key in ("y", "Y", "n", "N", "a", "A"):
                return key if key in ("a", "A") else key.lower()
            if key == "":
                return "n"  # stdin ended: nobody can answer

    def _decide(self, request: ApprovalRequest, answer: str) -> None:
        agent = request.agent_id
        if answer == "n":
            request.approve(False)
            self._renderer.show_decision(request, "rejected", approved=False)
            return
        request.approve(True)
        if answer == "a":
            self._policy.always(agent)
            self._renderer.show_decision(request, f"approved, and always for {agent} from now on", approved=True)
        elif answer == "A":
            self._policy.always_all()
            self._renderer.show_decision(request, "approved, and always for every agent from now on", approved=True)
        else:
            self._renderer.show_decision(request, "approved", approved=True)
        if answer in ("a", "A"):
            # queued requests the new standing decision covers run at once, in arrival order
            for queued in [r for r in self._pending if self._policy.is_approved(r.agent_id)]:
                self._pending.remove(queued)
                self._approve_standing(queued)

    def _approve_standing(self, request: ApprovalRequest) -> None:
        request.approve(True)
        self._renderer.show_request(request, note="auto-approved (standing decision)")
