"""Who the agent tree holds: what it needs of an agent (`TreeMember`), how a child is built (`ChildSpec`), its
record of each live agent (`AgentRecord`), and what `Agent.subagents()` lists (`SubagentInfo`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..policy.hooks import Hooks
from ..sandbox import BUILT_IN_PROFILES, SandboxProfile
from ..workspaces import Workspace

if TYPE_CHECKING:
    from ..config.agent_config import AgentConfig
    from ..config.definitions import AgentType
    from ..events import AgentEvent

__all__ = ["AgentRecord", "ChildSpec", "MemberConversation", "MemberInbox", "MemberTurns", "SubagentInfo",
           "TreeMember"]


class MemberInbox(Protocol):
    """An agent's inbox: messages for its next model request."""

    def tell(self, text: str, sender: str) -> None:
        """Queue a message (`sender`: who sent it, as the model reads it)."""
        ...

    def drop_unread(self) -> int:
        """Forget the messages not read (the agent ended); returns how many there were."""
        ...


class MemberConversation(Protocol):
    """An agent's conversation as far as its session goes."""

    def close(self, status: str, turns: int) -> None:
        """Record how the agent ended (in its session, if it saves one); nothing is saved after that."""
        ...

    def saved_child(self, agent_id: str) -> list[Any] | None:
        """The saved conversation of a child it started (in its session, from an earlier process too), or None."""
        ...

    def saved_children(self) -> list[Any]:
        """What its session says of each child it started (`SavedAgent`s, earlier processes' too)."""
        ...

    @property
    def session_folder(self) -> Path | None:
        """The folder of the session it is saved in (None: not saved)."""
        ...


class MemberTurns(Protocol):
    """What an agent's last turn used, and how it ended."""

    turns_used: int
    turn_limit_reached: bool
    last_turn_rejected: bool
    budget_reached: str | None

    @property
    def running(self) -> bool:
        """Whether a turn is under way."""
        ...


class TreeMember(Protocol):
    """What the tree and the `task` runner need of an agent."""

    agent_id: str
    config: AgentConfig

    @property
    def inbox(self) -> MemberInbox: ...
    @property
    def conversation(self) -> MemberConversation: ...

    @property
    def turns(self) -> MemberTurns: ...

    @property
    def settings(self) -> AgentConfig:
        """What the agent runs with: its config with its agent type applied."""
        ...

    @property
    def sandbox(self) -> SandboxProfile:
        """The sandbox profile the agent's kernel runs under."""
        ...

    @property
    def hooks(self) -> Hooks:
        """The hooks that apply to this agent (the config's and its type's)."""
        ...

    def hook_context(self) -> dict[str, Any]:
        """The fields every hook payload about this agent has (`agent_id`, `parent_id`, `agent_type`, …)."""
        ...

    @property
    def model(self) -> Any:
        """The resolved pydantic-ai `Model` (after `start()`)."""
        ...

    @property
    def history(self) -> list[Any]:
        """A copy of the conversation so far."""
        ...

    async def start(self) -> None: ...

    def cancel(self) -> None: ...

    def stream(self, prompt: str, max_turns: int | None = None) -> AsyncGenerator[AgentEvent, None]: ...

    async def stop(self) -> None: ...


@dataclass(frozen=True, kw_only=True)
class ChildSpec:
    """What a child is built from."""

    config: AgentConfig
    """The child's own config (model resolved, no `task` tool)."""
    parent_id: str
    tool_call_id: str
    """The parent's `task` call that starts it."""
    prompt: str
    agent_type: str
    definition: AgentType
    """The child's type."""
    description: str = ""
    agent_id: str | None = None
    """The id to run under (a resumed child keeps its id); None for a new one."""
    history: list[Any] | None = None
    """The conversation the child continues (resume) or starts from (fork); None for an empty one."""
    note: str | None = None
    """Told to the model with the first prompt (e.g. that the kernel is new)."""
    max_tokens: int | None = None
    """Budget: input plus output tokens over the child's life."""
    max_tool_calls: int | None = None
    """Budget: tool calls over the child's life."""
    max_cost: float | None = None
    """Budget: USD over the child's life (its model's price is known)."""
    sandbox: SandboxProfile = field(default_factory=lambda: BUILT_IN_PROFILES["off"])
    """The sandbox profile the child's kernel runs under (its parent's, narrowed by its type)."""
    workspace: Workspace | None = None
    """Its copy-on-write workspace (`isolation: copy-on-write`); None: it writes the working folder itself."""




@dataclass
class AgentRecord:
    """One live agent of a tree."""

    agent_id: str
    parent_id: str | None
    """None for the main agent."""
    agent_type: str
    """The agent type it runs as (`general` unless a type was named)."""
    description: str
    """The short title its `task` call gave it (empty for the main agent)."""
    agent: TreeMember
    started_at: float = field(default_factory=time.monotonic)
    background: bool = False
    """Whether it was started with `run_in_background`."""
    state: str = "waiting"
    """`waiting` (for a slot), `starting`, `running`; a record is removed when its agent ends."""
    task: asyncio.Task[Any] | None = None
    """The task that drives the child (cancelled to stop it)."""
    stopped_by: str | None = None
    """Who stopped it before it finished: `the user` or `its parent`."""
    prompt: str = ""
    """The job its `task` call gave it."""
    runs_code: bool | None = None
    """Whether its type lets it run cells (so it takes a kernel); worked out once, when first asked."""
    tool_call_id: str = ""
    """The call that started it (its parent's `task` call, or a cell's `<cell id>/code-task-<n>`); empty for the
    main agent."""
    requested: bool = False
    """Whether its first model request has gone out (`AgentTree.request_sent`)."""
    refill_for: Any = None
    """The config (`AgentConfig`) of a top-up of the pools held back until its first model request is out."""


@dataclass(frozen=True, kw_only=True)
class SubagentInfo:
    """One live subagent, as `Agent.subagents()` lists it."""

    agent_id: str
    parent_id: str
    agent_type: str
    description: str
    prompt: str
    state: str
    """`waiting` for a slot, `starting`, `running`, or `waiting for approval` (a person has a question of it)."""
    background: bool
    turns: int
    """Model rounds so far."""
    elapsed: float
    """Seconds since its `task` call."""
    input_tokens: int
    output_tokens: int
    cost: Decimal | None
    """USD, None if its model's price is unknown."""
    sandbox: str = ""
    """Its kernel's sandbox profile with its writes, hosts and limits (`SandboxProfile.describe()`)."""
