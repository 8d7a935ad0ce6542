"""Which `map_tasks` batch and row a `task` call id belongs to.

A batch asked as one question (`approve="batch"`) has the call id `<cell call id>/code-tasks-<n>`; each of its rows
runs under `<batch id>/row-<i>` (1-based), and a row asked to correct its answer under `<row id>-fix`. The front ends
group a batch's children under its question by these ids alone, so a saved session groups them as the live view did.
"""

from __future__ import annotations

import re

__all__ = ["batch_row", "is_batch_call", "row_call_id"]

_ROW = re.compile(r"^(?P<batch>.+/code-tasks-\d+)/row-(?P<row>\d+)(?:-fix)?$")
_BATCH = re.compile(r"^.+/code-tasks-\d+$")


def row_call_id(batch_id: str, row: int) -> str:
    """The call id of row `row` (1-based) of the batch whose question had the call id `batch_id`."""
    return f"{batch_id}/row-{row}"


def batch_row(call_id: str) -> tuple[str, int] | None:
    """`(batch id, row)` for a row's call id (or its correction's), else None."""
    match = _ROW.match(call_id)
    return (match.group("batch"), int(match.group("row"))) if match else None


def is_batch_call(call_id: str) -> bool:
    """Whether `call_id` is a batch's own question (and end), not one of its rows."""
    return _BATCH.match(call_id) is not None
