"""Standing approval decisions, shared by an agent and all its subagents."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ApprovalPolicy"]


class ApprovalPolicy:
    """Which agents are approved without asking.

    One policy is shared by a main agent and every subagent it starts, so a consumer can say
    "approve everything from agent-3fa2 from now on" for a child it has only just seen.
    Actions approved this way are still emitted, as `ApprovalRequest`s that are already decided.
    """

    def __init__(self, *, approve_everything: bool = False) -> None:
        self._agents: set[str] = set()
        self._everything = approve_everything
        self._listeners: list[Callable[[], None]] = []

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener()` after every change of a standing decision; returns a function that unsubscribes.

        Lets every view of the agents (each run's panels in a notebook) show the policy as it is,
        whoever changed it.
        """
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()

    def always(self, agent_id: str) -> None:
        """Approve every action of `agent_id` from now on."""
        self._agents.add(agent_id)
        self._changed()

    def clear(self, agent_id: str) -> None:
        """Ask again for each action of `agent_id`."""
        self._agents.discard(agent_id)
        self._changed()

    def always_all(self) -> None:
        """Approve every action of every agent from now on."""
        self._everything = True
        self._changed()

    def clear_all(self) -> None:
        """Forget every standing decision: ask for each action again."""
        self._everything = False
        self._agents.clear()
        self._changed()

    @property
    def everything(self) -> bool:
        """Whether every agent is approved."""
        return self._everything

    @property
    def agent_ids(self) -> frozenset[str]:
        """The agents approved one by one."""
        return frozenset(self._agents)

    def is_approved(self, agent_id: str) -> bool:
        """Whether an action of `agent_id` runs without asking."""
        return self._everything or agent_id in self._agents
