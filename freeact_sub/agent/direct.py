"""Turns the person directs: `@explore …` runs one agent type as a subagent of the main agent.

A directed turn does not ask the main agent's model what to do: it is a `task` call the person
made in the main agent's name. The call goes through everything a model's `task` call goes
through (its checks, the hooks, the rules, the person's approval), the child runs as any child
does, and the main agent's history gets the person's prompt, the call and its result, so the
main agent's model knows what the subagent found when the person talks to it next.

`split_type_prompt` reads the `@type` prefix the terminal and the notebook accept, `read_prompt` a
person's `/command` too.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config.commands import CommandFiles
    from ..events import Emit
    from .turn_owner import TurnOwner

__all__ = ["DIRECT_NOTE", "check_direct", "command_files", "direct_turn", "read_prompt", "split_type_prompt"]

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


def command_files(working_dir: Path, types: Iterable[str]) -> CommandFiles:
    """The command files, read afresh one by one: the good commands and each bad file's problems (every field
    named; an `agent` that is no agent type is one)."""
    from ..config.commands import read_commands

    known = list(types)
    return read_commands(working_dir, types=known or None)  # no types are known before start()


def read_prompt(
    text: str, working_dir: Path, types: Iterable[str], *, reserved: Iterable[str] = ()
) -> tuple[str, str | None, str | None]:
    """What a person's prompt asks for, as `(prompt, agent_type, model)`: a command of theirs (`/name args`,
    unless `/name` is one of the `reserved` commands of the surface), `@type prompt` (a known agent type), else
    the prompt itself for the main agent. `ConfigError` for `/name` whose file is bad (naming it and its fields)."""
    known = list(types)
    name, _, rest = text.strip().partition(" ")
    if name.startswith("/") and len(name) > 1 and "/" not in name[1:] and name not in set(reserved):
        files = command_files(working_dir, known)
        if name[1:] in files.commands or name[1:] in files.problems:
            command = files.get(name[1:])
            return command.prompt(rest), command.agent, command.model
    agent_type, prompt = split_type_prompt(text, known)
    return prompt, agent_type, None


def check_direct(can_start_subagents: bool, agent_type: str, model: Any, known: Iterable[str]) -> str | None:
    """Raise `ValueError` if the agent cannot start `agent_type` directly (before any turn begins); returns
    the subagent's model string."""
    if not can_start_subagents:
        raise ValueError(
            "agent_type: this agent cannot start subagents (enable_subagents is off, or its type or "
            "`tools` leave out `task`)"
        )
    names = list(known)
    if agent_type not in names:
        raise ValueError(
            f"agent_type: unknown agent type {agent_type!r}; the known types are {', '.join(sorted(names))}"
        )
    if model is not None and not isinstance(model, str):
        raise ValueError("model: a directed subagent's model is a model string (`provider:name`)")
    return model


async def direct_turn(owner: TurnOwner, prompt: str, agent_type: str, model: str | None, emit: Emit) -> bool:
    """The person's `task` call: asked, run and recorded as if the main agent's model had made it. Returns whether
    the person rejected it."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, UserPromptPart

    conversation = owner.conversation
    user = [UserPromptPart(DIRECT_NOTE.format(type=agent_type)), UserPromptPart(prompt)]
    conversation.add_user_parts(user, owner.system_prompt)
    arguments: dict[str, Any] = {"prompt": prompt, "subagent_type": agent_type, "description": _title(prompt)}
    if model is not None:
        arguments["model"] = model
    call = ToolCallPart(tool_name="task", args=arguments, tool_call_id=f"direct-{secrets.token_hex(4)}")
    conversation.messages.append(ModelResponse(parts=[call]))
    conversation.save(durable=False)
    part, rejected = await owner.parts.calls.run(call, emit)
    conversation.messages.append(ModelRequest(parts=[part]))
    conversation.save()
    return rejected  # a bare rejection: the terminal's one-shot mode exits 1, as for the model's


def _title(prompt: str) -> str:
    """A short title for a directed subagent: the prompt's first words."""
    words = prompt.split()
    return " ".join(words[:6]) + (" …" if len(words) > 6 else "")
