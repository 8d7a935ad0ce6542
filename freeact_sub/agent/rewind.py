"""An agent's checkpoints and rewinding to one: the working folder, the conversation, a new kernel.

`Rewinds` is a part of a main `Agent`. Before each turn (`before_turn`, from the turn engine) it takes a
checkpoint (`workspaces.Checkpoints`) in a thread, while the model request runs; the turn's tool calls wait for
it (`ready`), so what they change is after it. `rewind(number)` takes a checkpoint of the present first (to undo
the rewind by), restarts the kernel (its state cannot go back; nothing it started writes on), writes the folder
back, cuts the conversation back to that checkpoint's, and tells the model in its next request.

Checkpoints are kept in the session (`<session>/checkpoints/<agent id>/`), so a resumed session, also after
the host was killed, can rewind; without a saved session, in a private folder removed when the agent stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..events import Rewound
from ..sessions.shown import rewind_record

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

    from ..config.agent_config import AgentConfig
    from ..kernels.backends import KernelBackend
    from ..tree.registry import SubagentInfo
    from ..workspaces.checkpoints import Checkpoint, Checkpoints
    from .conversation import Conversation

__all__ = ["REWIND_NOTE", "RewindOwner", "Rewinds", "RewoundTurns"]

REWIND_NOTE = (
    "[The person rewound the working folder and this conversation to this point; what came after is "
    "gone. Your kernel was restarted: all variables, imports and definitions are gone.]"
)
CHECKPOINTS_FOLDER = "checkpoints"


class RewoundTurns(Protocol):
    """What rewinding needs of the turn engine: whether a run is under way, and the note for the next prompt."""

    first_note: str | None

    @property
    def running(self) -> bool: ...


class RewindOwner(Protocol):
    """What rewinding works on: the agent's settings, conversation, turns and kernel."""

    agent_id: str
    conversation: Conversation

    @property
    def turns(self) -> RewoundTurns: ...
    @property
    def settings(self) -> AgentConfig: ...
    @property
    def is_subagent(self) -> bool: ...
    @property
    def kernel(self) -> KernelBackend | None: ...
    def subagents(self) -> list[SubagentInfo]: ...


class Rewinds:
    """The checkpoints of one main agent and rewinding to them."""

    def __init__(self, owner: RewindOwner) -> None:
        self._owner = owner
        self._store: Checkpoints | None = None
        self._private: Path | None = None
        self._pending: asyncio.Future[Any] | None = None
        self._digests: dict[int, tuple[ModelMessage, str]] = {}
        self.off_reason: str | None = None
        """Why this agent takes no checkpoints (None: it takes them)."""

    def _open(self) -> Checkpoints | None:
        from ..workspaces.checkpoints import Checkpoints

        owner = self._owner
        if self._store is not None or self.off_reason is not None:
            return self._store
        settings = owner.settings
        if owner.is_subagent:
            self.off_reason = "a subagent's turns are covered by its parent's checkpoints"
        elif not settings.checkpoints:
            self.off_reason = "checkpoints are off (checkpoints = false)"
        if self.off_reason is not None:
            return None
        session = owner.conversation.session_folder
        if session is not None:
            folder = session / CHECKPOINTS_FOLDER / owner.agent_id
        else:
            self._private = Path(tempfile.mkdtemp(prefix="freeact-sub-checkpoints-"))
            folder = self._private
        self._store = Checkpoints(folder, settings.working_dir, limit=settings.checkpoint_limit)
        return self._store

    # -- before each turn ---------------------------------------------------------------------------------

    def before_turn(self, label: str, turn: int, history: list[ModelMessage]) -> None:
        """Start the checkpoint of this turn (in a thread): the folder now, and `history` (the conversation it
        goes back to)."""
        store = self._open()
        if store is None:
            return
        previous = self._pending
        digests = self._history(store, history)

        async def take() -> None:
            if previous is not None:
                with contextlib.suppress(Exception):
                    await previous
            await asyncio.to_thread(self._take, store, label, turn, digests)

        self._pending = asyncio.ensure_future(take())
        self._pending.add_done_callback(_retrieve)

    async def ready(self) -> None:
        """Wait until the checkpoint of this turn is taken (before its tool calls run)."""
        if self._pending is not None:
            await asyncio.shield(self._pending)

    def _take(self, store: Checkpoints, label: str, turn: int, digests: list[str]) -> None:
        from ..workspaces.checkpoints import FolderTooLarge

        try:
            store.take(label=label, turn=turn, history=digests)
        except (FolderTooLarge, OSError) as exc:  # no rewind from here on, and `rewind` says why
            self.off_reason = str(exc) if isinstance(exc, FolderTooLarge) else f"a checkpoint failed: {exc}"
            self._store = None
            store.close()

    def _history(self, store: Checkpoints, history: list[ModelMessage]) -> list[str]:
        """The hashes of `history`'s messages in the store (each message serialized and stored once)."""
        from ..sessions.transcript import dump_message

        known, self._digests = self._digests, {}
        digests = []
        for message in history:
            cached = known.get(id(message))
            if cached is not None and cached[0] is message:
                digest = cached[1]
            else:
                digest = store.blobs.put(dump_message(message))
            self._digests[id(message)] = (message, digest)
            digests.append(digest)
        return digests

    # -- listing and rewinding ------------------------------------------------------------------------------

    def checkpoints(self) -> list[Checkpoint]:
        """The checkpoints, oldest first, each with the files its turn changed."""
        store = self._open()
        return store.checkpoints() if store is not None else []

    async def rewind(self, number: int) -> Rewound:
        """See `Agent.rewind`."""
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        owner = self._owner
        if owner.turns.running:
            raise RuntimeError("a run is under way: cancel it (or let it end) before rewinding")
        if running := owner.subagents():
            names = ", ".join(info.agent_id for info in running)
            raise RuntimeError(f"subagents still run ({names}): stop them before rewinding, they write the folder")
        store = self._open()
        if store is None:
            raise RuntimeError(f"no checkpoints to rewind to: {self.off_reason}")
        await self.ready()
        if self._store is None:  # the folder proved too large
            raise RuntimeError(f"no checkpoints to rewind to: {self.off_reason}")
        store.history(number)  # ValueError for no such checkpoint, before anything changes
        history = owner.conversation.messages
        digests = self._history(store, history)
        undo = await asyncio.to_thread(
            store.take, kind="rewind", label=f"before rewinding to {number}", history=digests
        )
        kernel = owner.kernel
        if kernel is not None:
            await kernel.reset()
        report = await asyncio.to_thread(store.restore, number)
        saved = store.history(number)
        messages = list(ModelMessagesTypeAdapter.validate_json(b"[" + b",".join(saved) + b"]"))
        owner.conversation.continue_from(messages)
        owner.conversation.save()
        owner.turns.first_note = REWIND_NOTE
        event = Rewound(
            agent_id=owner.agent_id,
            checkpoint=number,
            undo=undo.number,
            restored=tuple(report.restored),
            removed=tuple(report.removed),
            failed=tuple(report.failed),
            messages_removed=max(0, len(history) - len(messages)),
            kernel_restarted=kernel is not None,
        )
        owner.conversation.shown(rewind_record(event, len(messages)))  # a resumed session shows it too
        return event

    async def close(self) -> None:
        """Wait for a checkpoint under way, stop watching the folder; a private store is removed."""
        if self._pending is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(self._pending)
        if self._store is not None:
            self._store.close()
        self._store = None
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None
        self.off_reason = None


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # a failed checkpoint shows when awaited (`ready`), never as "never retrieved"
