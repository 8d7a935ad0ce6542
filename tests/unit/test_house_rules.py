"""The house rules of DESIGN.md, checked on the source: no module reads another module's private names.

A private name (`_x`) may be used on `self` / `cls` only (and on the standard library's `os` /
`sys`). Everything else a module needs, its owner offers publicly.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "freeact_sub"

SAME_MODULE_OBJECTS: dict[str, set[str]] = {"agent/agent.py": {"child"}}
"""Names that hold objects of a class of the same module, per module: `child`, the subagent that `Agent`'s own
factory builds (its `_init` takes the tree and spec that `Agent(...)`, the public constructor, leaves out)."""


def _modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts)


@cache
def _tree(path: Path) -> ast.Module:
    source = path.read_text()
    for attempt in range(3):
        try:
            return ast.parse(source, str(path))
        except SystemError as error:
            # CPython 3.11's AST builder can report a false "recursion depth mismatch" in a process whose earlier
            # tests left its recursion state off (CPython gh-106905; seen once in a full run); each parse counts afresh
            if "recursion depth mismatch" not in str(error) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_module_imports_a_private_name_of_another() -> None:
    found = []
    for path in _modules():
        for node in ast.walk(_tree(path)):
            # `from . import _html` takes a private module of the package (httpx's layout); a name is not
            if isinstance(node, ast.ImportFrom) and node.level > 0 and node.module is not None:
                found += [f"{path.relative_to(PACKAGE)}:{node.lineno} imports {alias.name}"
                          for alias in node.names if _private(alias.name)]
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def test_no_module_reads_private_attributes_of_objects_it_does_not_own() -> None:
    found = []
    for path in _modules():
        relative = str(path.relative_to(PACKAGE))
        allowed = {"self", "cls", "os", "sys", *SAME_MODULE_OBJECTS.get(relative, set())}
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in allowed:
                    continue
                found.append(f"{relative}:{node.lineno} reads {ast.unparse(owner)}.{node.attr}")
    assert not found, "private attributes read from outside their owner:\n" + "\n".join(found)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, known: set[str]) -> set[str]:
    """The package's modules `path` imports anywhere (lazy and type-checking imports count too)."""
    own = _module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = f"{base}.{node.module}" if node.module else base
            candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("freeact_sub"):
            candidates = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names if alias.name.startswith("freeact_sub")]
        else:
            continue
        found.update(name for name in candidates if name in known and name != own)
    return found


def test_the_modules_of_the_package_import_each_other_without_circles() -> None:
    modules = {_module_name(path): path for path in _modules()}
    graph = {name: _imports(path, set(modules)) for name, path in modules.items()}
    # a package's __init__ re-exports what its modules define: arrows into a package are not cycles
    packages = {name for name, path in modules.items() if path.name == "__init__.py"}
    graph = {name: {t for t in targets if t not in packages} for name, targets in graph.items()}
    circles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                circles.append(" -> ".join([*stack[stack.index(target):], target]))
            elif target not in state:
                visit(target)
        stack.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert not circles, "modules that import each other:\n" + "\n".join(circles)


LAYERS: list[set[str]] = [
    {"cli"},
    {"terminal", "notebook", "acp"},
    {"launch"},
    {"demo"},
    {"__init__"},
    {"agent"},
    {"subagents"},
    {"tree"},
    {"code_tools"},
    {"kernels", "mcp"},
    {"config"},
    {"policy", "models", "sessions", "timelines"},
    {"telemetry"},
    {"sandbox", "tools", "events"},
    {"workspaces"},
    {"errors", "usage", "start_gc"},
]
"""The floors of the house, top first: a package imports only packages on floors below its own.

`__init__` is the root module, the library's API; the front ends and the demo stand above it and
use it. `cli` is the `freeact-sub` command's entry (it hands `acp` to the ACP agent, the rest to the
terminal); `launch` is what the command-line front ends share to build a configuration.
Rooms on one floor do not import each other either.
"""


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_packages_import_only_floors_below_their_own() -> None:
    floor = {room: number for number, rooms in enumerate(LAYERS) for room in rooms}
    modules = {_module_name(path): path for path in _modules()}
    unplaced = sorted({_room(name) for name in modules} - set(floor))
    assert not unplaced, f"rooms that stand on no floor of LAYERS: {unplaced}"
    upward = []
    for name, path in modules.items():
        here = _room(name)
        for target in _imports(path, set(modules)):
            there = _room(target)
            if there != here and floor[there] <= floor[here]:
                upward.append(f"{name} ({here}, floor {floor[here]}) imports {target} ({there}, floor {floor[there]})")
    assert not upward, "imports that do not run down the floors:\n" + "\n".join(sorted(upward))
