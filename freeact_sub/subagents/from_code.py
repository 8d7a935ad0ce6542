"""Subagents started from a cell's code (`from freeact_sub_tasks import task, map_tasks`).

The kernel sends `{"kind": "task", "prompt", ...}` or `{"kind": "map", "template", "prompts", "approve", ...}`
over its private channel (see `code_tools`); `CodeTasks` checks it (the kernel is hostile: types, sizes,
counts and the output schema are checked here, and a bad request is a readable error in the cell), asks for
each child like a `task` call of the model (an `ApprovalRequest` with `source="code"` and the cell's call id,
through the same hooks, rules and standing decisions), runs it through the `SubagentRunner` (the tree's bound,
`max_children`, budgets, events, sessions: a child started from code is a child of the agent whose cell started
it) and replies with its answer. With an output schema the child is told the shape, its answer is parsed and
checked, and a child whose answer does not fit is resumed once and asked to correct it.

A `map` request with `approve="batch"` asks one question for the whole batch (a `task` request whose
`prompt` is the template, `count` the number of items and `example` the first item's prompt); its rows run under
call ids that name the batch and the row (`events.batches`); once a person approves it, each
child's own request is approved at once (still after hooks and rules). A rejected batch raises in the cell;
a child that fails, is rejected or answers wrongly is an error value in its place.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..config.agent_types import GENERAL
from ..events import AgentEvent, ApprovalRequest, Emit, SubagentStarted, ToolOutput
from ..events.batches import row_call_id
from ..tools import jsonschema_module
from ..tools.bounded_schema import SchemaTimeout, first_error, refused_keywords
from .runner import SubagentRunner

__all__ = ["MAX_ITEMS", "MAX_PROMPT_CHARS", "MAX_SCHEMA_CHARS", "CodeTasks"]

MAX_PROMPT_CHARS = 100_000
"""The longest prompt (or template) a cell may send for one child."""
MAX_ITEMS = 1_000
"""The most items one `map_tasks` may send."""
MAX_SCHEMA_CHARS = 32_000
"""The longest output schema (as JSON) a cell may send."""
_MAX_TURNS = 1_000
_MAX_NAME = 200

Ask = Callable[..., Awaitable[ApprovalRequest]]


class _BadRequest(ValueError):
    """A request from the kernel that cannot be run: its message is raised in the cell."""


@dataclass(frozen=True)
class _Options:
    agent_type: str
    model: str | None
    max_turns: int | None
    description: str
    schema: dict[str, Any] | None
    isolation: str | None = None


class CodeTasks:
    """Runs the subagents one agent's cells start; `await tasks(request, cell_call_id, emit)` gives the reply."""

    def __init__(self, runner: SubagentRunner, ask: Ask, agent_id: str) -> None:
        self.agent_id = agent_id
        """The agent whose cells start these children (their results are its `ToolOutput`s from code)."""
        self._runner = runner
        self._ask = ask
        self._numbers = itertools.count(1)

    async def __call__(self, request: dict[str, Any], cell_call_id: str, emit: Emit) -> dict[str, Any]:
        try:
            kind = request.get("kind")
            options = _options(request)
            if kind == "task":
                return await self._one(_prompt(request.get("prompt"), "prompt"), options, cell_call_id, emit)
            prompts, template, approve = _batch(request)
        except _BadRequest as exc:
            return _failure("arguments", str(exc))
        granted, batch_id = False, None
        if approve == "batch" and prompts:
            # the first row filled in: a person approves what a row will read, not only the template
            arguments = {**_arguments(template, options), "count": len(prompts), "example": prompts[0]}
            if (problem := self._runner.check("task", arguments)) is not None:
                return _failure("failed", problem)
            batch_id = f"{cell_call_id}/code-tasks-{next(self._numbers)}"
            decided = await self._ask("task", arguments, batch_id, emit, source="code", cell_call_id=cell_call_id)
            if not await decided.approved():
                because = f": {decided.reason}" if decided.reason else ""
                return _failure("rejected", f"the batch of {len(prompts)} subagents was not approved{because}; "
                                            "none of them ran")
            granted = True
        results = await asyncio.gather(*(
            self._one(p, options, cell_call_id, emit, granted, row_call_id(batch_id, row) if batch_id else None)
            for row, p in enumerate(prompts, 1)))
        if batch_id is not None:  # the batch's own end: what its question started came back
            failed = sum(not r["ok"] for r in results)
            emit(ToolOutput(agent_id=self.agent_id, tool_name="task", tool_call_id=batch_id, source="code",
                            cell_call_id=cell_call_id, is_error=failed == len(results),
                            content=f"{len(results) - failed} of {len(results)} subagents answered"
                                    + (f"; {failed} failed or were not approved" if failed else "")))
        return {"ok": True, "results": results}

    async def _one(
        self, prompt: str, options: _Options, cell_call_id: str, emit: Emit, granted: bool = False,
        call_id: str | None = None,
    ) -> dict[str, Any]:
        """Ask for, run and check one child; its reply (an error as a value, never raised but for cancellation).

        A row of a batch runs under its row's call id (`events.batches`), so the front ends can group it."""
        call_id = call_id or f"{cell_call_id}/code-task-{next(self._numbers)}"
        arguments = _arguments(prompt, options)
        if (problem := self._runner.check("task", arguments)) is not None:
            return _failure("failed", problem)
        decided = await self._ask("task", arguments, call_id, emit, source="code", cell_call_id=cell_call_id,
                                  granted=granted)
        if not await decided.approved():
            because = f": {decided.reason}" if decided.reason else ""
            return _failure("rejected", f"the subagent was not approved{because}; it did not run")
        asked = decided.tool_args.get("prompt")  # as a PreToolUse hook may have rewritten it
        prompt = asked if isinstance(asked, str) and asked.strip() else prompt
        reply = await self._run(call_id, prompt, options, emit)
        value = reply.get("value") if reply["ok"] else reply["message"]
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        emit(ToolOutput(agent_id=self.agent_id, content=text, tool_name="task", tool_call_id=call_id,
                        is_error=not reply["ok"], source="code", cell_call_id=cell_call_id))
        return reply

    async def _run(self, call_id: str, prompt: str, options: _Options, emit: Emit) -> dict[str, Any]:
        """Run one approved child (and, if its answer does not fit `output`, once more to correct it)."""
        started: list[str] = []

        def watch(event: AgentEvent) -> None:
            if isinstance(event, SubagentStarted) and event.tool_call_id == call_id:
                started.append(event.subagent_id)
            emit(event)

        try:
            text, is_error = await self._runner.run(
                call_id, prompt + _shape_note(options.schema), options.max_turns, watch,
                agent_type=options.agent_type, model=options.model, description=options.description,
                isolation=options.isolation,
            )
            if is_error:
                return _failure("failed", text)
            if options.schema is None:
                return {"ok": True, "value": text}
            value, problem = await asyncio.to_thread(_parsed, text, options.schema)
            if problem is not None and started:  # asked once to correct itself
                text, is_error = await self._runner.run(
                    f"{call_id}-fix", _FIX_NOTE.format(problem=problem), options.max_turns, emit,
                    agent_type=options.agent_type, resume=started[0], description=options.description,
                    isolation=options.isolation,
                )
                if is_error:
                    return _failure("failed", text)
                value, problem = await asyncio.to_thread(_parsed, text, options.schema)
        except Exception as exc:  # a fault of ours must not take the other items with it
            return _failure("failed", f"{type(exc).__name__}: {exc}")
        if problem is not None:
            who = started[0] if started else "the subagent"
            return _failure("failed", f"the answer of {who} does not fit the output schema, also after it was asked "
                                      f"to correct it: {problem}")
        return {"ok": True, "value": value}


_SHAPE_NOTE = (
    "\n\n[Answer with only a JSON value that fits this JSON schema: no prose, no code fence.]\n"
    "```json\n{schema}\n```"
)
_FIX_NOTE = (
    "Your answer does not fit the JSON schema you were given: {problem}. Answer again with only the corrected "
    "JSON value: no prose, no code fence."
)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n?```$", re.DOTALL)


def _shape_note(schema: dict[str, Any] | None) -> str:
    return "" if schema is None else _SHAPE_NOTE.format(schema=json.dumps(schema, indent=1))


def _parsed(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """A child's answer as a JSON value that fits `schema`, or why it is not one."""
    body = text.strip()
    if (fenced := _FENCE.match(body)) is not None:
        body = fenced.group(1).strip()
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, f"it is not valid JSON ({exc.msg} at position {exc.pos})"
    try:  # in a thread, with a time bound: the schema came from a cell
        error = first_error(schema, value)
    except SchemaTimeout as exc:
        return None, f"the output schema could not be checked: {exc}"
    if error is None:
        return value, None
    where = "/".join(str(p) for p in error.absolute_path) or "the value"
    return None, f"{where}: {error.message[:300]}"


def _arguments(prompt: str, options: _Options) -> dict[str, Any]:
    """A child's `task` arguments, as its approval request shows them."""
    arguments: dict[str, Any] = {"prompt": prompt, "subagent_type": options.agent_type}
    if options.description:
        arguments["description"] = options.description
    if options.model is not None:
        arguments["model"] = options.model
    if options.max_turns is not None:
        arguments["max_turns"] = options.max_turns
    if options.isolation is not None:
        arguments["isolation"] = options.isolation
    return arguments


def _prompt(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise _BadRequest(f"the {name} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise _BadRequest(f"the {name} is empty: say what the subagent should do")
    if len(value) > MAX_PROMPT_CHARS:
        raise _BadRequest(f"the {name} has {len(value)} characters; at most {MAX_PROMPT_CHARS} are allowed")
    return value


def _name(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > _MAX_NAME:
        raise _BadRequest(f"{name} must be a non-empty str of at most {_MAX_NAME} characters, not {value!r:.80}")
    return value


def _options(request: dict[str, Any]) -> _Options:
    if request.get("kind") not in ("task", "map"):
        raise _BadRequest(f"unknown request kind {request.get('kind')!r:.40}")
    agent_type = _name(request.get("agent_type", request.get("subagent_type")), "agent_type") or GENERAL
    max_turns = request.get("max_turns")
    if max_turns is not None and (type(max_turns) is not int or not 1 <= max_turns <= _MAX_TURNS):
        raise _BadRequest(f"max_turns must be an int from 1 to {_MAX_TURNS}, not {max_turns!r:.40}")
    description = request.get("description")
    if description is not None and not isinstance(description, str):
        raise _BadRequest(f"description must be a str, not {type(description).__name__}")
    isolation = request.get("isolation")
    if isolation not in (None, "shared", "copy-on-write"):
        raise _BadRequest(f"isolation must be 'shared' or 'copy-on-write', not {isolation!r:.40}")
    return _Options(agent_type=agent_type, model=_name(request.get("model"), "model"), max_turns=max_turns,
                    description=" ".join(str(description or "").split())[:_MAX_NAME],
                    schema=_schema(request.get("output")), isolation=isolation)


def _schema(value: Any) -> dict[str, Any] | None:
    """The output schema a cell sent, checked: a valid JSON schema, small, whose `$ref`s stay inside it."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _BadRequest(f"output must be a pydantic model or a JSON schema (a dict), not {type(value).__name__}")
    text = json.dumps(value)
    if len(text) > MAX_SCHEMA_CHARS:
        raise _BadRequest(f"the output schema has {len(text)} characters as JSON; at most {MAX_SCHEMA_CHARS}")
    for ref in _refs(value):
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise _BadRequest(f"the output schema may refer only inside itself ($ref '#/...'), not to {ref!r:.80}")
    if (refused := refused_keywords(value)) is not None:
        raise _BadRequest(f"output schema: {refused}")
    jsonschema = jsonschema_module()
    try:
        jsonschema.Draft202012Validator.check_schema(value)
    except jsonschema.SchemaError as exc:
        raise _BadRequest(f"output is not a valid JSON schema: {exc.message[:300]}") from None
    return value


def _refs(value: Any) -> list[Any]:
    found: list[Any] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            found += [v for k, v in node.items() if k in ("$ref", "$dynamicRef")]
            stack += list(node.values())
        elif isinstance(node, list):
            stack += node
    return found


def _batch(request: dict[str, Any]) -> tuple[list[str], str, str]:
    prompts = request.get("prompts")
    if not isinstance(prompts, list):
        raise _BadRequest(f"the items' prompts must be a list, not {type(prompts).__name__}")
    if len(prompts) > MAX_ITEMS:
        raise _BadRequest(f"map_tasks got {len(prompts)} items; at most {MAX_ITEMS} are allowed in one call")
    checked = [_prompt(p, f"prompt of item {i}") for i, p in enumerate(prompts)]
    template = _prompt(request.get("template"), "template")
    approve = request.get("approve", "batch")
    if approve not in ("batch", "each"):
        raise _BadRequest(f"approve must be 'batch' or 'each', not {approve!r:.40}")
    return checked, template, approve


def _failure(kind: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": kind, "message": message}
