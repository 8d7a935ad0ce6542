"""How a person reads a `task` call before approving it: its type, title, limits and mode in words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["batch_example", "task_call_notes"]


def _count(value: Any, one: str, many: str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return f"{value:,} {one if value == 1 else many}"


def task_call_notes(arguments: Mapping[str, Any]) -> list[str]:
    """The settings of a `task` call beside its prompt, each a short phrase; empty for a plain call.

    E.g. `["reviewer", "on claude-haiku-4-5", "“Review the summary”", "at most 4 turns", "in the background"]`. Values
    of the wrong type are left out (the call itself reports them to the model).
    """
    notes: list[str] = []
    if batch := _count(arguments.get("count"), "subagent", "subagents"):  # `map_tasks` from code: one question
        notes.append(f"a batch of {batch}, one per item: approving it starts them all")
    kind = arguments.get("subagent_type")
    if isinstance(kind, str) and kind and kind != "general":
        notes.append(kind)
    model = arguments.get("model")
    if isinstance(model, str) and model.strip():
        notes.append(f"on {model.strip()}")
    title = arguments.get("description")
    if isinstance(title, str) and title.strip():
        notes.append(f"“{' '.join(title.split())}”")
    if turns := _count(arguments.get("max_turns"), "turn", "turns"):
        notes.append(f"at most {turns}")
    if tokens := _count(arguments.get("max_tokens"), "token", "tokens"):
        notes.append(f"at most {tokens}")
    if calls := _count(arguments.get("max_tool_calls"), "tool call", "tool calls"):
        notes.append(f"at most {calls}")
    cost = arguments.get("max_cost")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and cost > 0:
        notes.append(f"at most ${cost:g}")
    if arguments.get("run_in_background") is True:
        notes.append("in the background")
    resumed = arguments.get("resume")
    if isinstance(resumed, str) and resumed:
        notes.append(f"continues {resumed}")
    if arguments.get("fork") is True:
        notes.append("with a copy of this conversation")
    if arguments.get("isolation") == "copy-on-write":
        notes.append("in a workspace of its own (its changes come back to you to apply)")
    return notes


def batch_example(arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    """For a batch's question: `("row 1 of 50: ", <the template filled with the first row>)`, else None."""
    count, example = arguments.get("count"), arguments.get("example")
    if isinstance(count, bool) or not isinstance(count, int) or not isinstance(example, str):
        return None
    return f"row 1 of {count:,}: ", example
