"""Turn counts read right in the singular: "at most 1 turn", never "1 turns"."""

from __future__ import annotations

import pytest

from freeact_sub.notebook.call_view import _describe


@pytest.mark.parametrize(("limit", "text"), [(1, "at most 1 turn)"), (3, "at most 3 turns)")])
def test_the_notebook_names_a_tasks_turn_limit_in_the_right_number(limit: int, text: str) -> None:
    html = _describe("task", {"prompt": "count primes", "max_turns": limit})
    assert text in html and "1 turns" not in html
