"""`sessions show`'s last table: every agent of the saved session with its type, status, tokens and cost."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from .safe_text import clean

if TYPE_CHECKING:
    from rich.table import Table

    from freeact_sub.sessions import SavedSession

__all__ = ["agents_usage_table"]


def agents_usage_table(saved: SavedSession) -> Table:
    """One row per agent (a subagent indented under its parent), then the session's total."""
    from rich.table import Table

    from .status import format_cost

    agents = saved.agents
    table = Table("agent", "type", "status", "requests", "input", "output", "cost", title="usage per agent",
                  title_justify="left", box=None, pad_edge=False)
    for column in table.columns[3:]:
        column.justify = "right"
    cost: Decimal | None = None
    for agent_id, agent in agents.items():
        depth, parent = 0, agent.parent_id
        while parent in agents and depth < len(agents):
            depth, parent = depth + 1, agents[parent].parent_id
        table.add_row("  " * depth + agent_id, clean(agent.agent_type), clean(agent.status), str(agent.requests),
                      f"{agent.input_tokens:,}", f"{agent.output_tokens:,}", format_cost(agent.cost))
        if agent.cost is not None:
            cost = (cost or Decimal(0)) + agent.cost
    requests = sum(a.requests for a in agents.values())
    table.add_row("total", "", "", str(requests), f"{sum(a.input_tokens for a in agents.values()):,}",
                  f"{sum(a.output_tokens for a in agents.values()):,}", format_cost(cost), style="bold")
    return table
