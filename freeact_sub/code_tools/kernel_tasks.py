"""Subagents from code, the kernel side: copied into each generated package as `mcptools/_tasks.py` and
imported as `freeact_sub_tasks` (a one-line module next to the package).

    from freeact_sub_tasks import task, map_tasks

    answer = await task("Summarize README.md in one line")
    rows = await map_tasks("Classify the ticket {title!r}: {body}", tickets, output=Label)

Each call goes to the agent over the same private channel as the MCP tools' calls: the agent checks
it, asks for approval like a `task` tool call, runs the children and sends back their answers. Standard
library only (pydantic is used when the caller passes a pydantic model as `output`).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal

from mcptools._runtime import ToolCallError, request

__all__ = [
    "TaskCancelled",
    "TaskError",
    "TaskFailed",
    "TaskRejected",
    "map_tasks",
    "map_tasks_sync",
    "task",
    "task_sync",
]


class TaskError(ToolCallError):
    """Base of the errors a subagent started from code raises (or, in `map_tasks`, returns as an item's value)."""


class TaskFailed(TaskError):
    """The subagent failed, stopped early (turn limit, budget, stopped by someone), or its answer never fit
    `output`; or the request was refused before any subagent started (the message says why)."""


class TaskRejected(TaskError):
    """The subagent (or the whole `map_tasks` batch) was not approved; it did not run."""


class TaskCancelled(TaskError):
    """The turn was cancelled, or the agent stopped, while the subagent waited or ran."""


_ERRORS: dict[str, type[TaskError]] = {"rejected": TaskRejected, "cancelled": TaskCancelled}


def _error(reply: Mapping[str, Any]) -> TaskError:
    return _ERRORS.get(str(reply.get("error")), TaskFailed)(str(reply.get("message") or "the subagent failed"))


def _schema(output: Any) -> dict[str, Any] | None:
    if output is None:
        return None
    if isinstance(output, Mapping):
        return dict(output)
    if hasattr(output, "model_json_schema"):
        return output.model_json_schema()
    raise TypeError(f"output must be a pydantic model class or a JSON schema (a dict), not {output!r}")


def _value(output: Any, value: Any) -> Any:
    if output is not None and hasattr(output, "model_validate"):
        return output.model_validate(value)
    return value


def _options(
    agent_type: str | None, subagent_type: str | None, model: str | None, max_turns: int | None, output: Any,
    isolation: str | None = None,
) -> dict[str, Any]:
    if agent_type is not None and subagent_type is not None and agent_type != subagent_type:
        raise TypeError("give agent_type or its old name subagent_type, not both")
    options = {"agent_type": agent_type or subagent_type, "model": model, "max_turns": max_turns,
               "output": _schema(output)}
    if isolation is not None:
        options["isolation"] = isolation
    return options


def task_sync(
    prompt: str,
    *,
    agent_type: str | None = None,
    model: str | None = None,
    output: Any = None,
    max_turns: int | None = None,
    description: str | None = None,
    subagent_type: str | None = None,
    isolation: str | None = None,
) -> Any:
    """Run one subagent on `prompt` and return its answer; blocks until it ends.

    `agent_type` (old name: `subagent_type`) and `model` pick the agent type and one of the models it offers;
    `output` (a pydantic model class or a JSON schema) asks for an answer in that shape and returns it as
    that model (or the parsed JSON value); without it the answer is text. `isolation="copy-on-write"` runs it in a
    workspace of its own (its changes are applied when the person approves them). Raises `TaskRejected`,
    `TaskFailed` or `TaskCancelled`.
    """
    payload = {"kind": "task", "prompt": prompt, "description": description,
               **_options(agent_type, subagent_type, model, max_turns, output, isolation)}
    reply = request(payload)
    if not reply.get("ok"):
        raise _error(reply)
    return _value(output, reply.get("value"))


def _render(template: str, item: Any) -> str:
    fields = {str(k): v for k, v in item.items()} if isinstance(item, Mapping) else {}
    return template.format(item, **{"item": item, **fields})


def map_tasks_sync(
    prompt_template: str,
    items: Iterable[Any],
    *,
    agent_type: str | None = None,
    model: str | None = None,
    output: Any = None,
    max_turns: int | None = None,
    approve: Literal["batch", "each"] = "batch",
    subagent_type: str | None = None,
    isolation: str | None = None,
) -> list[Any]:
    """One subagent per item, at most as many at a time as the agent tree allows; returns their answers in the
    order of `items`. A failed, rejected or malformed item's value is its `TaskError` (it is not raised).

    The prompt of an item is `prompt_template.format(item, item=item, **item)` (the item's keys when it is a
    dict, e.g. a DataFrame row from `df.to_dict("records")`). `approve="batch"` asks once for the whole batch
    (the question names the template and the count; a rejected batch raises `TaskRejected`), `"each"` asks
    for every subagent on its own. `isolation="copy-on-write"` gives each its own workspace (each one's change
    set is decided when it ends).
    """
    rows = list(items)
    prompts = [_render(prompt_template, item) for item in rows]
    payload = {"kind": "map", "template": prompt_template, "prompts": prompts, "approve": approve,
               **_options(agent_type, subagent_type, model, max_turns, output, isolation)}
    reply = request(payload)
    if not reply.get("ok"):
        raise _error(reply)
    results: list[Any] = []
    for one in reply.get("results") or []:
        if not isinstance(one, Mapping) or not one.get("ok"):
            results.append(_error(one if isinstance(one, Mapping) else {}))
            continue
        try:
            results.append(_value(output, one.get("value")))
        except Exception as exc:  # the agent checked the schema; a model's own validators may still refuse
            results.append(TaskFailed(f"the answer does not fit {getattr(output, '__name__', 'output')}: {exc}"))
    return results


async def _in_thread(function: Any, *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)` in a thread of its own (a default executor would run only a few at a time)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(outcome: Any, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(outcome)

    def run() -> None:
        try:
            outcome = function(*args, **kwargs)
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, outcome, None)

    threading.Thread(target=run, name="freeact-sub-task", daemon=True).start()
    return await done


def _awaitable(blocking: Callable[..., Any], doc: str) -> Callable[..., Awaitable[Any]]:
    """The `await` form of `blocking`: its parameters (`help()` and completion show them), run in a thread."""

    @functools.wraps(blocking)
    async def awaitable(*args: Any, **kwargs: Any) -> Any:
        return await _in_thread(blocking, *args, **kwargs)

    awaitable.__name__ = awaitable.__qualname__ = blocking.__name__.removesuffix("_sync")
    awaitable.__doc__ = doc
    return awaitable


task = _awaitable(task_sync, "`task_sync` for `await` (several at once with `asyncio.gather`).")
map_tasks = _awaitable(map_tasks_sync, "`map_tasks_sync` for `await`.")
