"""JSON-schema validation with a time bound, for schemas and values a kernel sent (hostile input).

jsonschema evaluates `pattern`, `patternProperties` and `additionalProperties` next to them with Python's `re`,
whose backtracking can take exponential time on a crafted pattern and a short string (`^(a|aa)+$` against
34 characters: minutes). The validator here evaluates those keywords with the `regex` library, which takes a
timeout and releases the GIL while it matches, against one deadline for the whole validation; past it the
validation stops with `SchemaTimeout`. Run it in a thread (`asyncio.to_thread`): the event loop goes on meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import regex

from . import jsonschema_module

__all__ = ["VALIDATION_SECONDS", "SchemaTimeout", "first_error", "refused_keywords"]

VALIDATION_SECONDS = 1.0
"""The longest one validation may take, all its patterns together (seconds of CPU: `regex` counts its own)."""


class SchemaTimeout(Exception):
    """Validating against a schema took longer than allowed (a pattern that backtracks without end)."""


_deadline = threading.local()


def _search(pattern: str, text: str) -> bool:
    left = _deadline.at - time.monotonic()
    if left <= 0:
        raise SchemaTimeout(f"matching the pattern {pattern!r:.80} took too long")
    try:
        return regex.search(pattern, text, timeout=left, concurrent=True) is not None
    except TimeoutError:
        raise SchemaTimeout(f"matching the pattern {pattern!r:.80} took longer than {VALIDATION_SECONDS:g} s") from None
    except regex.error as exc:
        raise SchemaTimeout(f"the pattern {pattern!r:.80} is not a regular expression: {exc}") from None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield jsonschema_module().ValidationError(f"{instance!r:.80} does not match {pattern!r:.80}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [key for key in instance if key not in named and not any(_search(p, key) for p in patterns)]
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras)[:10])
        yield jsonschema_module().ValidationError(f"additional properties are not allowed ({listed} unexpected)")


_validator_class: Any = None


def _bounded_class() -> Any:
    global _validator_class
    if _validator_class is None:
        jsonschema = jsonschema_module()
        _validator_class = jsonschema.validators.extend(
            jsonschema.Draft202012Validator,
            {
                "pattern": _pattern,
                "patternProperties": _pattern_properties,
                "additionalProperties": _additional_properties,
            },
        )
    return _validator_class


def first_error(schema: dict[str, Any], value: Any, *, seconds: float = VALIDATION_SECONDS) -> Any | None:
    """The first (by path) error of `value` against `schema`, or None; `SchemaTimeout` past `seconds`.

    `unevaluatedProperties` is not bounded here (jsonschema matches `patternProperties` for it with `re`):
    `refused_keywords` says so of a schema before it is used.
    """
    _deadline.at = time.monotonic() + seconds
    validator = _bounded_class()(schema)
    errors = sorted(validator.iter_errors(value), key=lambda error: list(error.absolute_path))
    return errors[0] if errors else None


def refused_keywords(schema: Any) -> str | None:
    """Why `schema` is refused before any use: a keyword whose patterns this module cannot bound, or None."""
    stack: list[Any] = [schema]
    keys: set[str] = set()
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            keys.update(key for key in node if isinstance(key, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    if {"unevaluatedProperties", "patternProperties"} <= keys:
        return "`unevaluatedProperties` together with `patternProperties` is not supported (its patterns are unbounded)"
    return None
