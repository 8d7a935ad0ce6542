"""Hooks: a program's say at named moments of every agent's work, with Claude Code's event names.

A hook is a Python callable (sync or async) or a shell command. Both get one JSON object (a
callable as a `dict`, a command on stdin) with `hook_event_name`, `agent_id`, `parent_id`,
`subagent_type`, `session_id`, `cwd` and the fields of the moment, and answer nothing (no
opinion) or an object (a command prints it on stdout):

    {"decision": "allow" | "deny" | "ask", "reason": "...", "tool_input": {...}, "note": "..."}

- `PreToolUse` (`tool_name`, `tool_input`): before rules and approval. `allow` runs the call
  without asking, `deny` refuses it (the model gets the reason), `ask` leaves it to the rules
  and the person; `tool_input` replaces the call's arguments.
- `PostToolUse` (`tool_name`, `tool_input`, `tool_response`): a `note` is appended to the result
  the model gets.
- `UserPromptSubmit` (`prompt`): a `note` goes to the model with the prompt.
- `SubagentStart` / `SubagentStop` (`subagent_id`, `subagent_type`, `model`, `prompt`; at the
  stop also `status`, `turns_used`, `usage`) and `Stop` (`final_answer`): told, not asked.

A hook that raises, exits non-zero, prints something that is not a JSON object or runs past
its `timeout` changes nothing: the moment goes on as if it did not exist, and a `HookFailed`
event says which hook failed and why. Hooks run in the host process, never in a kernel.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import inspect
import json
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from ..events import AgentEvent, HookFailed

__all__ = [
    "HOOK_EVENTS", "HookAnswer", "HookFailure", "HookSpec", "HookTable", "Hooks", "hook_table", "pre_tool_verdict"
]

HOOK_EVENTS: tuple[str, ...] = (
    "PreToolUse", "PostToolUse", "UserPromptSubmit", "SubagentStart", "SubagentStop", "Stop"
)
_DECISIONS = ("allow", "deny", "ask")


class HookSpec(BaseModel):
    """One hook: a callable (`hook`) or a shell command (`command`), scoped by tool pattern and agent type."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True)

    hook: Any = None
    """A callable taking the moment's dict and returning None or an answer dict (may be async)."""
    command: str | None = None
    """A shell command that reads the moment as JSON on stdin and may print an answer as JSON."""
    matcher: str | None = None
    """Tool-name glob (`execute_*`, `files_*`) for the tool moments; unset: every tool."""
    agents: list[str] | None = None
    """Agent types it applies to (`general`, `reviewer`, …); unset: every agent."""
    timeout: float = Field(default=10.0, gt=0)
    """Seconds the hook may take; past that it counts as failed."""

    @model_validator(mode="after")
    def _one_form(self) -> HookSpec:
        if (self.hook is None) == (self.command is None):
            raise ValueError("a hook has either `hook` (a callable) or `command` (a shell command), not both")
        if self.hook is not None and not callable(self.hook):
            raise ValueError(f"hook: {self.hook!r} is not callable")
        return self

    @property
    def label(self) -> str:
        """How events and transcripts name this hook."""
        if self.command is not None:
            return self.command if len(self.command) <= 60 else self.command[:57] + "..."
        return getattr(self.hook, "__qualname__", None) or repr(self.hook)

    def applies(self, tool_name: str | None, agent_type: str) -> bool:
        if self.agents is not None and agent_type not in self.agents:
            return False
        return self.matcher is None or tool_name is None or fnmatch.fnmatchcase(tool_name, self.matcher)


@dataclass(frozen=True)
class HookAnswer:
    """What one hook answered (a hook with no opinion leaves none)."""

    hook: str
    """The hook's label."""
    decision: Literal["allow", "deny", "ask"] | None = None
    reason: str | None = None
    tool_input: dict[str, Any] | None = None
    note: str | None = None


class HookFailure(Exception):
    """A hook raised, exited non-zero, answered something that is not an answer, or ran out of time."""

    def __init__(self, hook: str, message: str) -> None:
        super().__init__(f"{hook}: {message}")
        self.hook = hook
        self.message = message


def hook_table(value: Any) -> dict[str, list[HookSpec]]:
    """`AgentConfig.hooks` from its config shapes: per event name, a list of callables, `HookSpec`s or
    tables (`{"matcher": ..., "command": ...}`, or Claude Code's `{"matcher": ..., "hooks": [{"type":
    "command", "command": ...}]}`)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError("hooks is a table of event names, each a list of hooks")
    table: dict[str, list[HookSpec]] = {}
    for event, entries in value.items():
        if event not in HOOK_EVENTS:
            raise ValueError(f"unknown hook event {event!r}; the events are {', '.join(HOOK_EVENTS)}")
        if callable(entries) or isinstance(entries, Mapping | HookSpec):
            entries = [entries]
        specs: list[HookSpec] = []
        for entry in entries:
            if isinstance(entry, HookSpec):
                specs.append(entry)
            elif callable(entry):
                specs.append(HookSpec(hook=entry))
            elif isinstance(entry, Mapping) and "hooks" in entry:  # Claude Code's settings shape
                shared = {k: v for k, v in entry.items() if k != "hooks"}
                for inner in entry["hooks"]:
                    fields = {k: v for k, v in dict(inner).items() if k != "type"}
                    specs.append(HookSpec.model_validate({**shared, **fields}))
            elif isinstance(entry, Mapping):
                specs.append(HookSpec.model_validate(dict(entry)))
            else:
                raise ValueError(f"{event}: a hook is a callable or a table, not {type(entry).__name__}")
        table[event] = specs
    return table


HookTable = Annotated[dict[str, list[HookSpec]], BeforeValidator(hook_table)]
"""A config field holding hooks by event name, in any of the shapes `hook_table` reads."""


class Hooks:
    """The hooks of one agent: the tree's, plus its type's own. Cheap to ask when there are none."""

    def __init__(self, table: Mapping[str, Sequence[HookSpec]] | None = None, *, cwd: str | None = None) -> None:
        self._table = {event: list(specs) for event, specs in (table or {}).items() if specs}
        self._cwd = cwd

    def plus(self, table: Mapping[str, Sequence[HookSpec]], agent_type: str) -> Hooks:
        """These hooks and a type's own (which apply to agents of that type only)."""
        merged = {event: list(specs) for event, specs in self._table.items()}
        for event, specs in table.items():
            scoped = [spec if spec.agents is not None else spec.model_copy(update={"agents": [agent_type]})
                      for spec in specs]
            merged.setdefault(event, []).extend(scoped)
        return Hooks(merged, cwd=self._cwd)

    def wants(self, event: str) -> bool:
        """Whether any hook listens to `event` (callers skip building the payload when none does)."""
        return event in self._table

    async def ask(
        self, event: str, context: Mapping[str, Any], fields: Mapping[str, Any], emit: Callable[[AgentEvent], None],
        *, tool_name: str | None = None, call_id: str | None = None,
    ) -> list[HookAnswer]:
        """Run the hooks of `event` for the agent `context` describes; their answers. A failed hook's
        `HookFailed` is emitted (as `context["agent_id"]`'s event) and its answer dropped."""
        answers, failures = await self.run(
            event, {**context, **fields}, agent_type=context.get("subagent_type") or "general", tool_name=tool_name
        )
        for failure in failures:
            emit(HookFailed(agent_id=context["agent_id"], hook_event_name=event, hook=failure.hook,
                           message=failure.message, tool_call_id=call_id))
        return answers

    async def run(
        self, event: str, payload: dict[str, Any], *, agent_type: str, tool_name: str | None = None
    ) -> tuple[list[HookAnswer], list[HookFailure]]:
        """Run every hook of `event` that applies, one after the other; their answers and their failures."""
        answers: list[HookAnswer] = []
        failures: list[HookFailure] = []
        message = {"hook_event_name": event, **payload}
        for spec in self._table.get(event, ()):
            if not spec.applies(tool_name, agent_type):
                continue
            try:
                raw = await (self._call(spec, message) if spec.hook is not None else self._command(spec, message))
                if (answer := _answer(spec.label, raw)) is not None:
                    answers.append(answer)
            except HookFailure as failure:
                failures.append(failure)
        return answers, failures

    @staticmethod
    async def _call(spec: HookSpec, message: dict[str, Any]) -> Any:
        try:
            async with asyncio.timeout(spec.timeout):
                result = spec.hook(dict(message))
                if inspect.isawaitable(result):
                    result = await result
        except TimeoutError:
            raise HookFailure(spec.label, f"took longer than its timeout of {spec.timeout:g} s") from None
        except Exception as exc:
            raise HookFailure(spec.label, f"raised {type(exc).__name__}: {exc}") from exc
        return result

    async def _command(self, spec: HookSpec, message: dict[str, Any]) -> Any:
        assert spec.command is not None
        try:
            process = await asyncio.create_subprocess_shell(
                spec.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=self._cwd, start_new_session=True,
            )
        except OSError as exc:
            raise HookFailure(spec.label, f"could not start: {exc}") from exc
        try:
            async with asyncio.timeout(spec.timeout):
                out, err = await process.communicate(json.dumps(message, default=str).encode())
        except BaseException as exc:
            _stop(process.pid)  # its own process group: the shell and what it started
            with contextlib.suppress(Exception):
                await asyncio.wait_for(process.wait(), 5)
            if isinstance(exc, TimeoutError):
                raise HookFailure(spec.label, f"took longer than its timeout of {spec.timeout:g} s") from None
            raise
        if process.returncode != 0:
            said = err.decode(errors="replace").strip().splitlines()[-3:]
            detail = f": {' / '.join(said)}" if said else ""
            raise HookFailure(spec.label, f"exited with {process.returncode}{detail}")
        text = out.decode(errors="replace").strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise HookFailure(spec.label, f"printed something that is not JSON: {text[:200]!r}") from None


def _stop(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def _answer(label: str, raw: Any) -> HookAnswer | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise HookFailure(label, f"answered {type(raw).__name__}, not an object (or nothing)")
    decision = raw.get("decision")
    if decision is not None and decision not in _DECISIONS:
        raise HookFailure(label, f"decision {decision!r} is not one of {', '.join(_DECISIONS)}")
    tool_input = raw.get("tool_input")
    if tool_input is not None and not isinstance(tool_input, Mapping):
        raise HookFailure(label, "tool_input must be an object")
    reason, note = raw.get("reason"), raw.get("note")
    return HookAnswer(
        hook=label, decision=decision, reason=str(reason) if reason is not None else None,
        tool_input=dict(tool_input) if tool_input is not None else None, note=str(note) if note else None,
    )



def pre_tool_verdict(answers: Sequence[HookAnswer]) -> HookAnswer | None:
    """What the `PreToolUse` hooks decided together: `deny` over `allow` over `ask`; the last rewrite of the
    arguments counts. None when no hook had an opinion."""
    if not answers:
        return None
    for decision in ("deny", "allow", "ask"):
        deciding = [a for a in answers if a.decision == decision]
        if deciding:
            chosen = deciding[0]
            break
    else:
        chosen = answers[-1]
    rewrites = [a for a in answers if a.tool_input is not None]
    if rewrites:
        labels = ", ".join(dict.fromkeys([chosen.hook] + [a.hook for a in rewrites]))
        return HookAnswer(hook=labels, decision=chosen.decision, reason=chosen.reason,
                          tool_input=rewrites[-1].tool_input)
    return chosen
