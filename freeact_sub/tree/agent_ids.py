"""Agent ids: `agent-` plus a few hex digits, unique in this process (a resumed agent keeps its saved one)."""

from __future__ import annotations

import secrets

__all__ = ["new_agent_id", "reserve_agent_id"]

_taken: set[str] = set()


def new_agent_id() -> str:
    """A short id, `agent-` plus hex, unique in this process."""
    size = 2
    while True:
        for _ in range(32):
            candidate = f"agent-{secrets.token_hex(size)}"
            if candidate not in _taken:
                _taken.add(candidate)
                return candidate
        size += 1


def reserve_agent_id(agent_id: str) -> None:
    """Keep `agent_id` (a resumed agent's) from being handed out again."""
    _taken.add(agent_id)
