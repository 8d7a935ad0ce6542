"""A schema a cell sends (`map_tasks(..., output=...)`) is evaluated on the host with a time bound.

A backtracking pattern against a child's short answer took Python's `re` (and so jsonschema) time that doubles
with each character; the host's event loop, and with it every agent and the person's screen, froze. The host's
check of a child's answer runs in a thread with one deadline for all its patterns: the loop is never held up
for more than 100 ms, and the answer is refused with a reason the cell can read.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from freeact_sub.subagents.from_code import _parsed, _schema
from freeact_sub.tools.bounded_schema import VALIDATION_SECONDS

EVIL = "^(a|aa)+$"
ANSWER = '"' + "a" * 60 + '!"'
KEYED = "{" + ANSWER + ": 1}"


async def _longest_stall(work: Any) -> tuple[Any, float]:
    """`work()`'s result and the longest the event loop went without running a 10 ms ticker meanwhile."""
    longest = 0.0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal longest
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            longest = max(longest, now - last - 0.01)
            last = now

    ticker = asyncio.create_task(tick())
    try:
        result = await work()
    finally:
        done.set()
        await ticker
    return result, longest


@pytest.mark.parametrize(
    "schema, answer",
    [
        ({"type": "string", "pattern": EVIL}, ANSWER),
        ({"type": "object", "patternProperties": {EVIL: {"type": "integer"}}}, KEYED),
        ({"type": "object", "properties": {}, "patternProperties": {EVIL: {}}, "additionalProperties": False}, KEYED),
        ({"type": "object", "propertyNames": {"pattern": EVIL}}, KEYED),
    ],
    ids=["pattern", "patternProperties", "additionalProperties", "propertyNames"],
)
async def test_a_backtracking_pattern_is_cut_off_without_stalling_the_event_loop(schema, answer) -> None:
    checked = _schema(schema)  # accepted as a schema: the pattern is valid
    assert checked is not None
    began = time.monotonic()
    (value, problem), stall = await _longest_stall(lambda: asyncio.to_thread(_parsed, answer, checked))
    assert value is None and problem is not None and "took longer" in problem
    # the bound counts CPU seconds; the wall clock of a loaded machine runs several times longer, and an unbounded
    # check of these 60 characters would not end in a lifetime
    assert time.monotonic() - began < 15 * VALIDATION_SECONDS
    # `regex` releases the GIL while it matches: the loop runs on (under `re` it stalled for the whole check); the
    # margin over 100 ms is for a machine whose other processes keep this one off the CPU meanwhile
    assert stall < 0.25, f"the event loop stalled for {stall:.3f} s"


async def test_ordinary_patterns_still_check_answers() -> None:
    schema = _schema(
        {
            "type": "object",
            "properties": {"id": {"type": "string", "pattern": "^[a-z]+-[0-9]+$"}},
            "patternProperties": {"^x-": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    assert schema is not None
    assert _parsed('{"id": "row-7", "x-n": 3}', schema) == ({"id": "row-7", "x-n": 3}, None)
    value, problem = _parsed('{"id": "Row 7"}', schema)
    assert value is None and problem is not None and "does not match" in problem
    value, problem = _parsed('{"id": "row-7", "other": 1}', schema)
    assert value is None and problem is not None and "'other'" in problem


def test_a_schema_whose_patterns_cannot_be_bounded_is_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="unevaluatedProperties"):
        _schema({"type": "object", "patternProperties": {EVIL: {}}, "unevaluatedProperties": False})
