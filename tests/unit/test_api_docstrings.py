"""The public API's docstrings teach only names that work: a keyword written in a docstring as `name=` is a
parameter of the function it documents (the API reference is made from these docstrings)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from typing import Any

import freeact_sub

KEYWORD = re.compile(r"`(\w+)=")


def public_callables() -> Iterator[tuple[str, Any]]:
    for name in freeact_sub.__all__:
        obj = getattr(freeact_sub, name)
        yield name, obj
        if inspect.isclass(obj):
            for member, value in vars(obj).items():
                if not member.startswith("_") and callable(value):
                    yield f"{name}.{member}", value


def test_every_keyword_a_docstring_shows_is_a_parameter_of_what_it_documents() -> None:
    wrong = []
    for label, value in public_callables():
        try:
            parameters = set(inspect.signature(value).parameters)
        except (TypeError, ValueError):  # no signature to hold it to (a constant, a builtin)
            continue
        wrong += [
            f"{label}: `{keyword}=`"
            for keyword in KEYWORD.findall(inspect.getdoc(value) or "")
            if keyword not in parameters
        ]
    assert not wrong, wrong  # e.g. Agent.stream teaching `subagent_type="explore"`, which raises TypeError
