"""MCP server configurations in the widely used `mcpServers` shape: stdio (`command`) or HTTP (`url`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import InitErrorDetails

from ..sandbox.profiles import SandboxSetting

__all__ = ["HttpServerConfig", "McpServerConfig", "StdioServerConfig", "servers_by_shape", "with_location"]


class StdioServerConfig(BaseModel):
    """An MCP server started as a child process and spoken to over stdin/stdout."""

    model_config = ConfigDict(extra="forbid")

    command: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: str | None = None
    sandbox: SandboxSetting = None
    """Confine the server process to a sandbox profile (a name or a table); None: it runs with the user's rights."""


class HttpServerConfig(BaseModel):
    """An MCP server reached over streamable HTTP."""

    model_config = ConfigDict(extra="forbid")

    url: str
    headers: dict[str, str] = Field(default_factory=dict)


McpServerConfig = StdioServerConfig | HttpServerConfig


_TYPES = ("stdio", "http", "streamable-http", "streamableHttp")


def servers_by_shape(value: Any) -> Any:
    """Validate each server of an `mcpServers` mapping as stdio (`command`) or HTTP (`url`); a `type` of
    `stdio` or `http` (VS Code's and Claude's spelling) is accepted, other transports are refused by name."""
    if not isinstance(value, Mapping):
        return value
    parsed: dict[str, Any] = {}
    for name, spec in value.items():
        if not isinstance(spec, Mapping):
            parsed[name] = spec
            continue
        kind = spec.get("type")  # VS Code's and Claude's files say it
        if kind is not None:
            if kind not in _TYPES:
                raise ValueError(f"{name}.type: {kind!r} is not a transport this client speaks (stdio or http)")
            spec = {k: v for k, v in spec.items() if k != "type"}
        shape = HttpServerConfig if "url" in spec else StdioServerConfig
        try:
            parsed[name] = shape.model_validate(spec)
        except ValidationError as exc:
            raise with_location(exc, name) from None
    return parsed


def with_location(exc: ValidationError, name: str) -> ValidationError:
    """`exc` with `name` in front of each location, so the message says which entry is wrong."""
    details = [
        InitErrorDetails(type=e["type"], loc=(name, *e["loc"]), input=e["input"], ctx=e.get("ctx", {}))
        for e in exc.errors()
    ]
    return ValidationError.from_exception_data(exc.title, details)
