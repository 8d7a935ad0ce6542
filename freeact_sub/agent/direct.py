"""Turns the person directs: `@explore …` runs one agent type as a subagent of the main agent.

A directed turn does not ask the main agent's model what to do: it is a `task` call the person
made in the main agent's name. The call goes through everything a model's `task` call goes
through (its checks, the hooks, the rules, the person's approval), the child runs as any child
does, and the main agent's history gets the person's prompt, the call and its result, so the
main agent's model knows what the subagent found when the person talks to it next.

`split_type_prompt` reads the `@type` prefix the terminal and the notebook accept.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncGenerator, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

    from ..config.agent_config import AgentConfig
    from ..config.commands import Command, CommandFiles
    from ..events import AgentEvent
    from ..subagents.runner import SubagentRunner
    from ..tools import Toolbox
    from ..tree.registry import AgentTree
    from .tool_calls import Emit, ToolCallRunner

__all__ = ["DIRECT_NOTE", "DirectTurns", "split_type_prompt"]

DIRECT_NOTE = (
    "[The user started a subagent of type `{type}` directly, with the prompt below. The `task` call that follows is "
    "theirs, made in your name; its result is the subagent's answer.]"
)
_AT_TYPE = re.compile(r"@([A-Za-z0-9][A-Za-z0-9_.-]*)(?=\s|$)")


def split_type_prompt(prompt: str, types: Iterable[str]) -> tuple[str | None, str]:
    """`("explore", "find the parser")` for `"@explore find the parser"` when `explore` is one of `types`.

    A prompt that does not start with `@` and a known type name is `(None, prompt)` unchanged
    (an e-mail address or a decorator stays a prompt).
    """
    text = prompt.lstrip()
    match = _AT_TYPE.match(text)
    if match is None or match.group(1) not in set(types):
        return None, prompt
    return match.group(1), text[match.end():].strip()


class DirectTurns:
    """The directed turn of an `Agent` (a base class of its turn engine); the state it uses is the agent's."""

    if TYPE_CHECKING:
        turns_used: int
        turn_limit_reached: bool
        last_turn_rejected: bool
        _history: list[ModelMessage]
        _calls: ToolCallRunner | None
        _subagents: SubagentRunner | None
        _toolbox: Toolbox | None
        tree: AgentTree

        @property
        def system_prompt(self) -> str: ...
        @property
        def settings(self) -> AgentConfig: ...
        def _save(self, *, durable: bool = True) -> None: ...
        def stream(
            self, prompt: str, max_turns: int | None = None, *, subagent_type: str | None = None,
            model: Any = None,
        ) -> AsyncGenerator[AgentEvent, None]: ...

    def commands(self) -> dict[str, Command]:
        """The person's and the project's commands that can run (`.freeact-sub/commands/*.md`), read afresh; a bad
        file is left out (`command_files()` says what is wrong with it)."""
        return self.command_files().commands

    def command_files(self) -> CommandFiles:
        """The command files, read afresh one by one: the good commands and each bad file's problems (every field
        named; an `agent` that is no agent type is one)."""
        from ..config.commands import read_commands

        return read_commands(self.settings.working_dir, types=self.tree.types or None)  # none known before start()

    def read_prompt(self, text: str, *, reserved: Iterable[str] = ()) -> tuple[str, str | None, str | None]:
        """What a person's prompt asks for, as `(prompt, subagent_type, model)`: a command of theirs (`/name args`,
        unless `/name` is one of the `reserved` commands of the surface), `@type prompt` (a known agent type), else
        the prompt itself for the main agent. `ConfigError` for `/name` whose file is bad (naming it and its fields)."""
        name, _, rest = text.strip().partition(" ")
        if name.startswith("/") and len(name) > 1 and "/" not in name[1:] and name not in set(reserved):
            files = self.command_files()
            if name[1:] in files.commands or name[1:] in files.problems:
                command = files.get(name[1:])
                return command.prompt(rest), command.agent, command.model
        subagent_type, prompt = split_type_prompt(text, self.tree.types)
        return prompt, subagent_type, None

    def stream_command(
        self, name: str, arguments: str = "", max_turns: int | None = None
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the command `name` with `arguments` as one turn (what `/name arguments` does in the terminal).

        A command with an `agent` runs as a subagent of that type (as `stream(..., subagent_type=...)`);
        its `model` is the model of the turn. `ConfigError` for an unknown command or a bad file.
        """
        command = self.command_files().get(name)
        return self.stream(command.prompt(arguments), max_turns, subagent_type=command.agent, model=command.model)

    def check_direct(self, subagent_type: str, model: Any, known: Iterable[str]) -> str | None:
        """Raise `ValueError` if this agent cannot start `subagent_type` directly (before any turn begins); returns
        the subagent's model string."""
        if self._subagents is None or self._toolbox is None or "task" not in self._toolbox:
            raise ValueError(
                "subagent_type: this agent cannot start subagents (enable_subagents is off, or its type or "
                "`tools` leave out `task`)"
            )
        names = list(known)
        if subagent_type not in names:
            raise ValueError(
                f"subagent_type: unknown agent type {subagent_type!r}; the known types are {', '.join(sorted(names))}"
            )
        if model is not None and not isinstance(model, str):
            raise ValueError("model: a directed subagent's model is a model string (`provider:name`)")
        return model

    async def _direct_turn(self, prompt: str, subagent_type: str, model: str | None, emit: Emit) -> None:
        """The person's `task` call: asked, run and recorded as if the main agent's model had made it."""
        from pydantic_ai.messages import ModelRequest, ModelResponse, SystemPromptPart, ToolCallPart, UserPromptPart

        assert self._calls is not None
        self.turns_used, self.turn_limit_reached, self.last_turn_rejected = 0, False, False
        user = [UserPromptPart(DIRECT_NOTE.format(type=subagent_type)), UserPromptPart(prompt)]
        if not self._history:
            self._history.append(ModelRequest(parts=[SystemPromptPart(self.system_prompt), *user]))
        elif isinstance(last := self._history[-1], ModelRequest):
            self._history[-1] = ModelRequest(parts=[*last.parts, *user])
        else:
            self._history.append(ModelRequest(parts=user))
        arguments: dict[str, Any] = {"prompt": prompt, "subagent_type": subagent_type,
                                     "description": _title(prompt)}
        if model is not None:
            arguments["model"] = model
        call = ToolCallPart(tool_name="task", args=arguments, tool_call_id=f"direct-{secrets.token_hex(4)}")
        self._history.append(ModelResponse(parts=[call]))
        self._save(durable=False)
        part, rejected = await self._calls.run(call, emit)
        self._history.append(ModelRequest(parts=[part]))
        self.last_turn_rejected = rejected  # a bare rejection: the terminal's one-shot mode exits 1, as for the model's
        self._save()


def _title(prompt: str) -> str:
    """A short title for a directed subagent: the prompt's first words."""
    words = prompt.split()
    return " ".join(words[:6]) + (" …" if len(words) > 6 else "")
