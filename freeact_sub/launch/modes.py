"""Modes a person switches between: ask every time, approve everything, or plan read-only.

The terminal's `/mode` and an ACP client's `session/set_mode` (`freeact-sub acp`) offer the same three:

- `ask` (the default): every cell, MCP call and subagent waits for the person's approval;
- `auto`: everything is approved as if the person had said "always, for every agent"; an approval rule's
  `deny` (or `ask`) still decides first, and every call is still shown;
- `plan`: each prompt runs as the built-in read-only `plan` type (its kernel under the `read-only` sandbox
  where the platform allows it): it reads and proposes, and changes nothing. `@type …` still picks a type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from freeact_sub import Agent

__all__ = ["MODES", "Mode", "initial_mode", "mode_help"]


@dataclass(frozen=True, kw_only=True)
class Mode:
    """One mode: how calls are approved, and the type a prompt runs as."""

    id: str
    name: str
    description: str
    approve_everything: bool = False
    agent_type: str | None = None
    """The agent type a prompt without `@type` runs as (None: the main agent itself)."""

    def apply(self, agent: Agent) -> None:
        """Make `agent`'s standing decisions this mode's (the next call is decided by them)."""
        if self.approve_everything:
            agent.approvals.always_all()
        else:
            agent.approvals.clear_all()

    def turn_type(self, agent_type: str | None) -> str | None:
        """The type a prompt runs as: the one it names (`@type`), else this mode's."""
        return agent_type if agent_type is not None else self.agent_type


MODES = {
    mode.id: mode
    for mode in (
        Mode(id="ask", name="Ask every time", description="Every cell, MCP call and subagent waits for your approval."),
        Mode(id="auto", name="Auto-approve", approve_everything=True,
             description="Everything runs without asking (an approval rule's deny still denies); each call is shown."),
        Mode(id="plan", name="Plan (read-only)", agent_type="plan",
             description="Each prompt goes to the read-only plan type: it reads and proposes, and changes nothing."),
    )
}


def initial_mode(agent: Agent) -> Mode:
    """The mode an agent starts in: `auto` when its configuration approves everything, else `ask`."""
    return MODES["auto"] if agent.approvals.everything else MODES["ask"]


def mode_help(current: Mode) -> str:
    """What `/mode` shows: each mode, the current one marked."""
    lines = [f"{'→' if mode is current else ' '} {mode.id:<5} {mode.name}: {mode.description}"
             for mode in MODES.values()]
    return "Modes (/mode NAME switches):\n" + "\n".join(lines)
