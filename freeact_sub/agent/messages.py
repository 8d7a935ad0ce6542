"""Messages to and from a running subagent: the person's or a parent's message in, `task_report` out.

`SubagentMessages` is a base class of `Agent`: each agent has an inbox that its turn engine
empties into the request of its next model round (`TurnEngine._tell_background_results`). A
parent's `task_send` and the person's `Agent.send` put messages there; a child's `task_report`
goes to its parent's `SubagentRunner`, whose model reads it at its next round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..events import SubagentReport

if TYPE_CHECKING:
    from ..subagents.runner import SubagentRunner
    from ..tree.registry import AgentTree
    from .tool_calls import Emit

__all__ = ["SubagentMessages"]


class SubagentMessages:
    """An agent's inbox, the person's `send`, and a child's report to its parent (the agent's state is used)."""

    if TYPE_CHECKING:
        agent_id: str
        parent_id: str | None
        tree: AgentTree
        _inbox: list[tuple[str, str]]
        _subagents: SubagentRunner | None

    def send(self, agent_id: str, text: str) -> None:
        """Send your message to a running subagent of this agent's tree (at any depth).

        It reads it at its next model request (queued while a round runs), marked as yours, and
        goes on working; a `SubagentMessage` event records it. Raises `ValueError` for an empty
        message or an id that is no running subagent (one that ended is resumed by its parent).
        """
        self.tree.send(agent_id, text)

    def tell(self, text: str, sender: str) -> None:
        """Queue a message for this agent's next model request (`sender` as the model reads it: `the user`, …)."""
        self._inbox.append((sender, text))

    def drop_unread(self) -> int:
        """Forget the messages this agent has not read (it ended); returns how many there were."""
        unread, self._inbox = len(self._inbox), []
        return unread

    def take_report(self, child_id: str, text: str) -> None:
        """A running child's `task_report`: this agent's model reads it at its next model request."""
        if self._subagents is not None:
            self._subagents.report(child_id, text)

    def report_to_parent(self, text: str, emit: Emit) -> None:
        """This subagent's `task_report`: to its parent's next model request, and a `SubagentReport` event."""
        record = self.tree.agents.get(self.parent_id or "")
        if record is not None:
            record.agent.take_report(self.agent_id, text)
        emit(SubagentReport(agent_id=self.agent_id, parent_id=self.parent_id or "", text=text))
