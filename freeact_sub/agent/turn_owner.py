"""What an agent's turn engine works on: its owner (`TurnOwner`) and the budgets it checks (`Budgets`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..tree.members import TreeMember

if TYPE_CHECKING:
    from pydantic_ai.models import Model

    from ..tree.registry import AgentTree
    from .conversation import Conversation
    from .inbox import Inbox
    from .parts import AgentParts
    from .rewind import Rewinds

__all__ = ["Budgets", "TurnOwner"]


@dataclass
class Budgets:
    """A subagent's budgets over its life, checked before each model request (None: no budget)."""

    max_tokens: int | None = None
    """Input plus output tokens."""
    max_tool_calls: int | None = None
    max_cost: float | None = None
    """USD."""


class TurnOwner(TreeMember, Protocol):
    """What the turn engine works on besides what the tree knows of an agent: its tree, its own conversation and
    inbox, its budgets, its system prompt and its running parts."""

    tree: AgentTree
    budgets: Budgets

    @property
    def conversation(self) -> Conversation: ...
    @property
    def inbox(self) -> Inbox: ...
    @property
    def is_subagent(self) -> bool: ...
    @property
    def system_prompt(self) -> str: ...
    @property
    def model(self) -> Model: ...
    @property
    def parts(self) -> AgentParts: ...
    @property
    def rewinds(self) -> Rewinds: ...
