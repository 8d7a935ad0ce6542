"""Messages to a running agent (the person's, its parent's `task_send`), read at its next model request.

Each agent has an inbox that its turn empties into the request of its next model round. A
parent's `task_send` and the person's `Agent.send` put messages there (through the tree).
"""

from __future__ import annotations

__all__ = ["Inbox"]


class Inbox:
    """Messages for one agent, in the order they came, each with who sent it."""

    def __init__(self) -> None:
        self._messages: list[tuple[str, str]] = []

    def tell(self, text: str, sender: str) -> None:
        """Queue a message for the agent's next model request (`sender` as the model reads it: `the user`, …)."""
        self._messages.append((sender, text))

    def drop_unread(self) -> int:
        """Forget the messages the agent has not read (it ended); returns how many there were."""
        unread, self._messages = len(self._messages), []
        return unread

    def take_notes(self) -> list[str]:
        """The unread messages as notes for the model, and the inbox empty."""
        messages, self._messages = self._messages, []
        return [f"[A message from {sender}, sent while you work:]\n{text}" for sender, text in messages]
