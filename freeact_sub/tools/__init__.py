"""The tools the model sees: loaded from the JSON tool definitions, plus MCP tools.

The JSON files (`execute_ipython_cell.json`, `reset_kernel.json`, `task.json`) in the project's
top-level `tools/` folder are the one source of truth for names, descriptions and argument
schemas. The wheel ships them inside this package (`freeact_sub/tools/definitions/`); a source
tree or an editable install reads them from `tools/` itself.
Arguments the model sends are checked against these schemas here, and every problem comes
back as a message the model can act on.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["BUILTIN_TOOL_NAMES", "ToolSpec", "Toolbox", "builtin_tool", "definitions_dir", "parse_arguments",
           "skip_format_checkers"]

BUILTIN_TOOL_NAMES = (
    "execute_ipython_cell", "reset_kernel", "task", "task_output", "task_stop", "task_list", "task_send", "task_report",
    "load_skill",
)


@dataclass(frozen=True)
class ToolSpec:
    """A tool's name, description and JSON schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]

    def definition(self) -> Any:
        """The pydantic-ai `ToolDefinition` for this tool."""
        from pydantic_ai.tools import ToolDefinition

        return ToolDefinition(
            name=self.name, description=self.description, parameters_json_schema=self.parameters
        )


@cache
def definitions_dir() -> Traversable:
    """The folder of the JSON tool definitions: inside the installed package, else the source tree's `tools/`."""
    shipped = resources.files(__package__).joinpath("definitions")
    if shipped.is_dir():
        return shipped
    source = Path(__file__).resolve().parents[2] / "tools"
    if source.is_dir():
        return source
    raise FileNotFoundError(f"the JSON tool definitions are missing: neither {shipped} nor {source} exists")


_FORMAT_LIBRARIES = ("fqdn", "rfc3987", "rfc3986_validator", "rfc3339_validator", "webcolors", "jsonpointer",
                     "uri_template", "isoduration")
"""What jsonschema's format checkers import, if installed, when jsonschema is imported (jupyterlab brings them)."""
_skipped: tuple[str, ...] = ("rfc3987_syntax",)


def skip_format_checkers() -> None:
    """This process checks no string `format` with jsonschema: import it without the libraries its format checkers
    use (isoduration with arrow and dateutil, fqdn, webcolors, …: ~0.09 s of CPU, half of jsonschema's import).

    The `freeact-sub` command calls it (`launch.build_config`): no one else's code runs in its process. A program
    that imports `freeact_sub` keeps jsonschema's formats, and a process that imported jsonschema already is as it
    was. The libraries themselves still import after.
    """
    global _skipped
    _skipped = ("rfc3987_syntax", *_FORMAT_LIBRARIES)


def jsonschema_module() -> ModuleType:
    """`jsonschema`, imported on first use (`freeact-sub --help` should not pay for it) and without the IRI grammar.

    Where `rfc3987-syntax` is installed (jupyterlab's extras bring it), importing jsonschema builds its 38 Lark
    parsers for the `iri` format: ~2 s of CPU in every process that starts an agent. Nothing here checks
    formats, so jsonschema is imported as if it were missing; the person's own import of it still works after.
    After `skip_format_checkers()`, the same goes for every library of its format checkers.
    """
    if "jsonschema" not in sys.modules:
        hidden = [name for name in _skipped if name not in sys.modules]
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]  # an ImportError for jsonschema, which skips it
        try:
            import jsonschema
        finally:
            for name in hidden:
                del sys.modules[name]
    import jsonschema

    return jsonschema


@cache
def builtin_tool(name: str) -> ToolSpec:
    """Load one of the JSON tool definitions (`tools/<name>.json`)."""
    text = definitions_dir().joinpath(f"{name}.json").read_text(encoding="utf-8")
    data = json.loads(text)
    jsonschema_module().Draft202012Validator.check_schema(data["parameters"])
    return ToolSpec(name=data["name"], description=data["description"], parameters=data["parameters"])


def parse_arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """Turn a tool call's raw arguments into a dict; `ValueError` says what is wrong with them."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        # `exc.msg` may end in "at" itself ("Unterminated string starting at")
        problem = f"{exc.msg.removesuffix(' at')} at position {exc.pos}"
        raise ValueError(f"the arguments are not valid JSON ({problem}): {raw[:200]!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"the arguments must be a JSON object, got {type(value).__name__}: {raw[:200]!r}")
    return value


class Toolbox:
    """The tools one agent offers, by name, with argument validation."""

    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        jsonschema = jsonschema_module()
        self._specs = {spec.name: spec for spec in specs}
        self._validators = {
            name: jsonschema.Draft202012Validator(spec.parameters) for name, spec in self._specs.items()
        }

    @property
    def names(self) -> list[str]:
        return list(self._specs)

    def definitions(self) -> list[Any]:
        return [spec.definition() for spec in self._specs.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def check(self, name: str, arguments: dict[str, Any]) -> str | None:
        """None if the call is valid, else a message for the model saying what to correct."""
        if name not in self._specs:
            available = ", ".join(self._specs) or "none"
            return f"Unknown tool {name!r}. Available tools: {available}."
        errors = sorted(self._validators[name].iter_errors(arguments), key=lambda e: list(e.path))
        if not errors:
            return None
        problems = []
        for error in errors[:5]:
            where = ".".join(str(p) for p in error.path) or "arguments"
            problems.append(f"- {where}: {error.message}")
        return f"Invalid arguments for {name!r}:\n" + "\n".join(problems)

    def with_defaults(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Fill in the schema's top-level defaults for arguments the model left out."""
        properties = self._specs[name].parameters.get("properties", {})
        filled = dict(arguments)
        for key, schema in properties.items():
            if key not in filled and isinstance(schema, dict) and "default" in schema:
                filled[key] = schema["default"]
        return filled
