"""Layered loading of a config: defaults < config file (JSON or TOML) < environment (`FREEACT_SUB_*`) < overrides.

What comes out is the plain values of each layer merged; `AgentConfig.load` validates them. Every
problem is a `ConfigError` that names the file, the variable or the field.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.fields import FieldInfo

from ..errors import ConfigError
from .kernel_gateway import KernelGatewayConfig
from .mcp_servers import McpServerConfig, McpServers

__all__ = [
    "ENV_PREFIX",
    "auto_approve_from_env",
    "describe",
    "environment_values",
    "error_lines",
    "layered_values",
    "load_mcp_config",
    "read_config_file",
]

ENV_PREFIX = "FREEACT_SUB_"


def layered_values(
    config_file: str | Path | None,
    *,
    mcp_config: str | Path | None,
    environ: Mapping[str, str] | None,
    gateway_username: str | None,
    overrides: Mapping[str, Any],
    fields: Mapping[str, FieldInfo],
) -> dict[str, Any]:
    """The values of a config's layers merged, highest last: `config_file`, `mcp_config`, `environ`, `overrides`.

    `fields` are the config's fields (each may come from `FREEACT_SUB_<FIELD>`); overrides whose
    value is None are ignored. See `AgentConfig.load`.
    """
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    if config_file is not None:
        values.update(read_config_file(Path(config_file)))
    if mcp_config is not None:
        values["mcp_servers"] = load_mcp_config(mcp_config)
    given = {k: v for k, v in overrides.items() if v is not None}
    if isinstance(values.get("agents"), Mapping) and isinstance(given.get("agents"), Mapping):
        given["agents"] = {**values["agents"], **given["agents"]}  # code's types replace the file's by name
    for layer in (environment_values(environ, fields), given):
        gateway, earlier = layer.get("kernel_gateway"), values.get("kernel_gateway")
        if isinstance(gateway, str) and isinstance(earlier, Mapping):
            layer["kernel_gateway"] = {**earlier, "url": gateway}  # a URL alone keeps the file's other settings
        values.update(layer)
    if gateway_username is not None and values.get("kernel_gateway") is None:
        raise ConfigError("gateway_username (--gateway-username) names the user of a kernel gateway, but no "
                          "gateway is set (--kernel-gateway, kernel_gateway or $FREEACT_SUB_KERNEL_GATEWAY)")
    # the variable alone is ignored without a gateway: it may be exported for other uses of the program
    username = gateway_username
    if username is None:
        username = environ.get(ENV_PREFIX + "GATEWAY_USERNAME") or None
    if username is not None and values.get("kernel_gateway") is not None:
        values["kernel_gateway"] = _with_username(values["kernel_gateway"], username)
    return values


class _ServersFile(BaseModel):
    """The `mcp_servers` of a config, validated as `AgentConfig` validates them."""

    model_config = ConfigDict(extra="forbid")

    mcp_servers: McpServers


def load_mcp_config(path: str | Path) -> dict[str, McpServerConfig]:
    """Read a JSON file in the `mcpServers` shape (`{"mcpServers": {name: {...}}}` or the inner mapping), or VS Code's
    `{"servers": {name: {"type": "stdio", ...}}}` (its `inputs` are not read)."""
    data = read_config_file(Path(path))
    if "mcp_servers" in data:
        servers = data["mcp_servers"]
    elif isinstance(data.get("servers"), Mapping):  # VS Code's .vscode/mcp.json
        servers = data["servers"]
    elif data and all(isinstance(spec, Mapping) and ("command" in spec or "url" in spec) for spec in data.values()):
        servers = data
    else:
        raise ConfigError(f"{path}: expected `mcpServers` (or VS Code's `servers`): an object mapping server names to "
                          f"their settings; the file has {', '.join(map(repr, data)) or 'nothing'}")
    if not isinstance(servers, Mapping):
        raise ConfigError(f"{path}: mcpServers must be an object mapping server names to their settings")
    try:
        return _ServersFile.model_validate({"mcp_servers": servers}).mcp_servers
    except ValidationError as exc:
        raise ConfigError(describe(exc, str(path))) from None


def read_config_file(path: Path) -> dict[str, Any]:
    """The top-level object of a JSON or TOML config file (`.toml`: TOML), its `mcpServers` as `mcp_servers`."""
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise ConfigError(f"{path}: not valid {kind}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected an object at the top level")
    if "mcpServers" in data:
        data["mcp_servers"] = data.pop("mcpServers")
    return data


def _with_username(gateway: Any, username: str) -> Any:
    """`kernel_gateway` (a URL, a table or a `KernelGatewayConfig`) with its `username` set."""
    if isinstance(gateway, str):
        return {"url": gateway, "username": username}
    if isinstance(gateway, KernelGatewayConfig):
        return {**gateway.model_dump(exclude_unset=True), "username": username}
    if isinstance(gateway, Mapping):
        return {**gateway, "username": username}
    return gateway  # not a gateway setting at all: validation names the field


def environment_values(environ: Mapping[str, str], fields: Mapping[str, FieldInfo]) -> dict[str, Any]:
    """`FREEACT_SUB_<FIELD>` for every field of `fields` (`AgentConfig.model_fields`). For a field that is not plain
    text, a value starting with `[` or `{` is read as JSON (`FREEACT_SUB_TOOLS='["execute_*"]'`); anything else is
    text the field converts."""
    values: dict[str, Any] = {}
    for field in fields:
        raw = environ.get(ENV_PREFIX + field.upper())
        if raw is None or raw == "":
            continue
        text = raw.strip()
        if text[:1] in ("[", "{") and fields[field].annotation not in (str, str | None):
            try:
                values[field] = json.loads(text)
                continue
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{ENV_PREFIX}{field.upper()}: not valid JSON: {exc}") from None
        values[field] = raw
    return values


def auto_approve_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether `FREEACT_SUB_AUTO_APPROVE` asks to approve every action."""
    raw = (os.environ if environ is None else environ).get(ENV_PREFIX + "AUTO_APPROVE", "")
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def describe(exc: ValidationError, source: str) -> str:
    """pydantic's errors as one message naming `source` and, on a line each, every field and what is wrong."""
    fields = "\n  ".join(error_lines(exc))
    return f"invalid {source}:\n  {fields}"


def error_lines(exc: ValidationError) -> list[str]:
    """One `field.path: message` line per error of `exc`."""
    lines = []
    for error in exc.errors(include_url=False):
        location = ".".join(str(part) for part in error["loc"]) or "(top level)"
        lines.append(f"{location}: {error['msg']}")
    return lines

