"""Exceptions raised by freeact-sub.

    FreeactError
    ├── ConfigError        a bad config file, flag or environment value (names the field)
    ├── KernelError        the IPython kernel could not be started or reached
    ├── McpServerError     an MCP server failed to start or to list its tools (names the server)
    ├── ModelError         the model request failed during a turn (the history is as before the turn)
    └── SessionError       a session cannot be created, a saved one is missing, or another process holds it

    ConfigWarning (a UserWarning): a setting that was read but has no effect here (names the file and field)

Faults *inside* a turn that the model can correct (unknown tool, invalid arguments, a cell that
raises, a crashed MCP server, a failed subagent) never raise: they become tool results.
"""

from __future__ import annotations

__all__ = [
    "ConfigError", "ConfigWarning", "FreeactError", "KernelError", "McpServerError", "ModelError", "SessionError",
]


class FreeactError(Exception):
    """Base of every error freeact-sub raises."""


class ConfigError(FreeactError, ValueError):
    """A configuration problem; the message names the field or the file at fault."""


class KernelError(FreeactError, RuntimeError):
    """The IPython kernel could not be started or reached."""


class McpServerError(FreeactError, RuntimeError):
    """An MCP server failed to start, to initialize or to list its tools."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(f"MCP server {server!r}: {message}")
        self.server = server


class ModelError(FreeactError, RuntimeError):
    """The model request failed during a turn."""


class SessionError(FreeactError, RuntimeError):
    """A session cannot be created, a saved one is missing, or another process holds it."""


class ConfigWarning(UserWarning):
    """A setting read but left without effect (a Claude Code or OpenCode field with no meaning here); names it."""
