"""What an agent's turn engine works on: its owner (`TurnOwner`) and the budgets it checks (`Budgets`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pydantic_ai.models import Model

    from ..config.agent_config import AgentConfig
    from ..policy.hooks import Hooks
    from ..tree.registry import AgentTree
    from .conversation import Conversation
    from .inbox import Inbox
    from .parts import AgentParts

__all__ = ["Budgets", "TurnOwner"]


@dataclass
class Budgets:
    """A subagent's budgets over its life, checked before each model request (None: no budget)."""

    max_tokens: int | None = None
    """Input plus output tokens."""
    max_tool_calls: int | None = None
    max_cost: float | None = None
    """USD."""


class TurnOwner(Protocol):
    """What the turn engine works on: its agent's identity, settings, conversation and parts."""

    agent_id: str
    tree: AgentTree
    conversation: Conversation
    inbox: Inbox
    budgets: Budgets

    @property
    def is_subagent(self) -> bool: ...
    @property
    def settings(self) -> AgentConfig: ...
    @property
    def hooks(self) -> Hooks: ...
    @property
    def system_prompt(self) -> str: ...
    @property
    def model(self) -> Model: ...
    @property
    def parts(self) -> AgentParts: ...
    def hook_context(self) -> dict[str, Any]: ...
