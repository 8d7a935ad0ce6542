"""Tool names and the glob patterns that pick them (`execute_ipython_cell`, `calc_*`, `<server>_<tool>`)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

from ..errors import ConfigError
from . import BUILTIN_TOOL_NAMES

__all__ = ["check_tool_names", "qualified_tool_name", "server_may_offer", "tool_allowed", "tools_meet",
           "unmatched_patterns"]

_TOOL_NAME_MAX = 64


def qualified_tool_name(server: str, tool: str) -> str:
    """`<server>_<tool>`, as the model calls an MCP tool (characters a tool name cannot have become `_`)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}_{tool}")
    return name[:_TOOL_NAME_MAX]


def tool_allowed(name: str, tools: Iterable[str] | None, disallowed: Iterable[str] = ()) -> bool:
    """Whether tool `name` is offered under the `tools` patterns (None: all) minus the `disallowed` ones."""
    if tools is not None and not any(fnmatch.fnmatchcase(name, pattern) for pattern in tools):
        return False
    return not any(fnmatch.fnmatchcase(name, pattern) for pattern in disallowed)


def tools_meet(parent: list[str] | None, child: list[str] | None) -> list[str] | None:
    """The `tools` patterns of a child whose parent allows `parent` and whose type asks for `child` (None: all).

    A child never gets a tool its parent's configuration left out: the child's entries its parent's patterns allow,
    and the parent's entries the child's patterns take in (`github_*` under `github_search`: `github_search`).
    """
    if parent is None or child is None:
        return child if parent is None else list(parent)
    kept = [entry for entry in child if tool_allowed(entry, parent)]
    kept += [entry for entry in parent if entry not in kept and tool_allowed(entry, child)]
    return kept


def unmatched_patterns(patterns: Iterable[str], names: Iterable[str], servers: Iterable[str] = ()) -> list[str]:
    """The tool patterns that match none of `names` (a typo such as `demo_wordcount`, or a server not configured).

    A pattern that may name tools of one of `servers` (configured, but not started because the
    patterns rule it out) is not reported: its tools are unknown, not missing.
    """
    known, prefixes = list(names), [qualified_tool_name(server, "") for server in servers]
    return [
        pattern for pattern in patterns
        if not any(fnmatch.fnmatchcase(name, pattern) for name in known)
        and not any(_may_start_with(pattern, prefix) for prefix in prefixes)
    ]


def server_may_offer(server: str, tools: Iterable[str] | None, disallowed: Iterable[str] = ()) -> bool:
    """Whether a tool of MCP server `server` could pass the `tools` / `disallowed` patterns.

    An agent whose patterns rule out every `<server>_…` name does not connect to that server
    (no process is started for it). The answer errs towards True: a pattern keeps a server
    unless its literal start (before any wildcard) and the server's prefix disagree.
    """
    prefix = qualified_tool_name(server, "")
    if tools is not None and not any(_may_start_with(pattern, prefix) for pattern in tools):
        return False
    return not any(_covers_all_starting_with(pattern, prefix) for pattern in disallowed)


def _literal_start(pattern: str) -> tuple[str, bool]:
    """The pattern's text before its first wildcard, and whether it has one."""
    for index, char in enumerate(pattern):
        if char in "*?[":
            return pattern[:index], True
    return pattern, False


def _may_start_with(pattern: str, prefix: str) -> bool:
    literal, wild = _literal_start(pattern)
    if not wild:
        return literal.startswith(prefix)
    return literal.startswith(prefix) or prefix.startswith(literal)


def _covers_all_starting_with(pattern: str, prefix: str) -> bool:
    literal, wild = _literal_start(pattern)
    return wild and pattern == literal + "*" and prefix.startswith(literal)


def check_tool_names(patterns: Iterable[str], field: str, servers: Iterable[str]) -> None:
    """A `ConfigError` naming `field` for a tool name or pattern that can match no tool: not a built-in tool,
    and not `<server>_…` of one of `servers` (a typo such as `execute_ipython_call`)."""
    servers = sorted(set(servers))
    for pattern in unmatched_patterns(patterns, BUILTIN_TOOL_NAMES, servers):
        mcp = (f"or <server>_<tool> of the MCP servers {', '.join(servers)}" if servers
               else "and no MCP server is configured for <server>_<tool> names")
        raise ConfigError(f"{field}: {pattern!r} names no tool (the built-in tools are "
                          f"{', '.join(BUILTIN_TOOL_NAMES)}; {mcp})")
