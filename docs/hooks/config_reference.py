"""MkDocs hook: the configuration reference and the API page's list, generated at every build.

A page asks for a table with a marker line, `<!-- fields: AgentConfig -->` (or `KernelGatewayConfig`);
the hook replaces it with one row per field of that class of the root API: its name, its default and
the docstring written under the field.
So the table cannot drift from the code: a new field shows up, and a field without a docstring
fails the build. `<!-- api: freeact_sub -->` becomes one `::: freeact_sub.<name>` per name of the
root's `__all__`, grouped, so the API reference documents exactly what the package exports.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import re
import textwrap
from pathlib import Path
from typing import Any

MARKER = re.compile(r"^<!-- fields: (\w+) -->$", flags=re.M)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    markdown = MARKER.sub(lambda match: field_table(match.group(1)), markdown)
    return API_MARKER.sub(lambda match: api_reference(), markdown)


def field_table(class_name: str) -> str:
    import freeact_sub

    cls = getattr(freeact_sub, class_name)  # by its root name: modules move, the API does not
    docs = field_docstrings(cls)
    rows = ["| field | default | meaning |", "|---|---|---|"]
    missing = []
    for name, field in cls.model_fields.items():
        doc = docs.get(name)
        if not doc:
            missing.append(name)
            continue
        cells = [f"`{name}`", default_text(field), one_cell(doc)]
        rows.append("| " + " | ".join(cells) + " |")
    if missing:
        raise ValueError(f"{class_name}: these fields have no docstring for the reference table: {missing}")
    return "\n".join(rows)


def field_docstrings(cls: type) -> dict[str, str]:
    """The string literal written right under each annotated field of the class body."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for statement, after in itertools.pairwise(body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[statement.target.id] = inspect.cleandoc(after.value.value)
    return docs


def default_text(field: Any) -> str:
    factory = field.default_factory
    if factory == Path.cwd:
        return "the current directory"
    value = factory() if factory is not None else field.default
    if isinstance(value, str) and len(value) > 40:
        return "the built-in prompt"
    return f"`{value!r}`"


def one_cell(doc: str) -> str:
    """A docstring as one table cell: paragraphs joined, pipes escaped."""
    paragraphs = [" ".join(part.split()) for part in doc.split("\n\n")]
    return "<br><br>".join(paragraphs).replace("|", "\\|")


API_MARKER = re.compile(r"^<!-- api: freeact_sub -->$", flags=re.M)
GROUPS = (
    ("The agent", ("Agent", "AgentConfig", "KernelGatewayConfig")),
    ("Events", None),
    ("Errors and warnings", None),
    ("Everything else", None),
)


def api_reference() -> str:
    """`::: freeact_sub.<name>` for every name the root exports, grouped: agent, events, errors, the rest."""
    import freeact_sub

    names = [name for name in freeact_sub.__all__ if not name.startswith("_")]
    first = list(GROUPS[0][1] or ())
    events = [n for n in names if _is_subclass(getattr(freeact_sub, n), freeact_sub.AgentEvent)]
    errors = [n for n in names if _is_subclass(getattr(freeact_sub, n), (Exception, Warning))]
    rest = [n for n in names if n not in first and n not in events and n not in errors]
    out = []
    for (title, _), group in zip(GROUPS, (first, events, errors, rest), strict=True):
        out.append(f"## {title}\n")
        out += [f"::: freeact_sub.{name}\n" for name in group]
    return "\n".join(out)


def _is_subclass(value: Any, base: Any) -> bool:
    return isinstance(value, type) and issubclass(value, base)
