"""MkDocs hook: the configuration reference and the API page's list, generated at every build.

A page asks for a table with a marker line, `<!-- fields: AgentConfig -->` (or `KernelGatewayConfig`);
the hook replaces it with one row per field of that class of the root API: its name, its default and
the docstring written under the field.
So the table cannot drift from the code: a new field shows up, and a field without a docstring
fails the build. `<!-- api: events -->` becomes one `::: freeact_sub.<name>` per name of the root's `__all__`
that belongs on that page of the API reference (`API_PAGES`), so the reference documents exactly what the
package exports, one concept a page.
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
    return API_MARKER.sub(lambda match: api_reference(match.group(1)), markdown)


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


API_MARKER = re.compile(r"^<!-- api: (\w+) -->$", flags=re.M)

API_PAGES: dict[str, tuple[str, ...]] = {
    "agent": ("Agent", "AgentConfig", "KernelGatewayConfig", "ModelOption", "SubagentInfo", "load_mcp_config",
              "DEFAULT_SYSTEM_PROMPT", "Checkpoint"),
    "events": ("AgentEvent", "BatchTracker", "BatchUpdate", "Batch", "BatchRow"),  # and every event, found by class
    "approvals": ("ApprovalPolicy", "HookSpec"),
    "types": ("AgentType", "BUILTIN_TYPES", "Command", "CommandFiles"),
    "usage": ("Usage", "TreeUsage", "timeline", "Timeline", "TimelineBuilder"),
    "trust": ("ProjectPowers", "trusted_folders", "forget_folder", "guard_imports", "trust_module"),
    "errors": (),  # every exception and warning, found by class
}
"""Which page of the API reference shows each exported name: one concept a page. A name `__all__` gains that no
page holds fails the build, so the reference can never silently leave one out."""

INTERNAL_MEMBERS: dict[str, tuple[str, ...]] = {
    "Agent": ("tree", "rules", "budgets", "conversation", "inbox", "report_to_parent", "turns", "rewinds", "parts",
              "kernel", "hook_context", "own_processes"),
    "AgentConfig": ("make_working_dir", "make_state_dir", "resolved_images_dir"),
}
"""Members of exported classes that the front ends and the agent's own parts use, not a person's program: the
reference leaves them out."""


def api_reference(page: str) -> str:
    """`::: freeact_sub.<name>` for every exported name that belongs on `page` (see `API_PAGES`)."""
    names = api_pages()[page]
    return "\n".join(directive(name) for name in names)


def api_pages() -> dict[str, list[str]]:
    """Every exported name (but `__version__`) on exactly one page: the listed ones, then events and errors."""
    import freeact_sub

    names = [name for name in freeact_sub.__all__ if not name.startswith("_")]
    pages = {page: list(listed) for page, listed in API_PAGES.items()}
    placed = {name for listed in API_PAGES.values() for name in listed}
    for name in names:
        value = getattr(freeact_sub, name)
        if name in placed:
            continue
        if _is_subclass(value, freeact_sub.AgentEvent):
            pages["events"].append(name)
        elif _is_subclass(value, (Exception, Warning)):
            pages["errors"].append(name)
        else:
            raise ValueError(f"freeact_sub.{name} is exported but on no page of the API reference: add it to API_PAGES")
    return pages


def directive(name: str) -> str:
    hidden = INTERNAL_MEMBERS.get(name, ())
    if not hidden:
        return f"::: freeact_sub.{name}\n"
    filters = ", ".join(['"!^_"', *(f'"!^{member}$"' for member in hidden)])
    return f"::: freeact_sub.{name}\n    options:\n      filters: [{filters}]\n"


def _is_subclass(value: Any, base: Any) -> bool:
    return isinstance(value, type) and issubclass(value, base)
