"""An agent type applied: the config, the sandbox profile and the model choices an agent of a type runs with."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..models.options import ModelOption, find_option
from ..sandbox import check_enforceable, meet
from ..sandbox.profiles import SandboxProfile
from ..tools.names import tools_meet
from .agent_config import AgentConfig
from .builtin_types import BUILTIN_TYPES
from .definitions import AgentType

__all__ = ["configure", "confine", "model_options", "pick_model", "sandbox_for"]

_TYPE_WINS = ("max_turns", "mcp_tools", "max_children", "model_retries", "stream_idle_timeout")
"""Fields a type sets for its agents whenever it gives them (None: the parent's)."""


def configure(
    base: AgentConfig, definition: AgentType, name: str, *, model: Any = None, choice: ModelOption | None = None
) -> AgentConfig:
    """The config an agent of type `name` runs with: `base` (its parent's, or the main agent's) with the type applied.

    A type that names a `model` brings its own connection: its `base_url`, `api_key_env` and
    `model_settings` (unset: the provider's defaults), never the parent's. A type without a
    `model` keeps the parent's (`model`: the parent's resolved `Model`, when given); a
    `base_url` or `api_key_env` of its own then points the parent's model name elsewhere.
    `choice` (a model the `task` call picked from the allowlist) replaces the model, with its own connection.
    """
    update: dict[str, Any] = {}
    if choice is not None:
        update.update(model=choice.model, base_url=choice.base_url, api_key_env=choice.api_key_env,
                      model_settings=choice.model_settings)
    elif definition.model is not None:
        update.update(
            model=definition.model,
            base_url=definition.base_url,
            api_key_env=definition.api_key_env,
            model_settings=definition.model_settings,
        )
    else:
        if definition.base_url is not None or definition.api_key_env is not None:
            if not isinstance(base.model, str):
                raise ConfigError(
                    f"agent type {name!r}: base_url: needs a model name, but the inherited model is a "
                    f"{type(base.model).__name__} object; set the type's `model` too"
                )
            update.update(
                base_url=definition.base_url or base.base_url, api_key_env=definition.api_key_env or base.api_key_env
            )
        elif model is not None:
            update["model"] = model
        if definition.model_settings is not None:
            update["model_settings"] = definition.model_settings
    if "api_key_env" in update and update.get("model") is not None:
        update["context_window"] = None  # the parent's window was set for the parent's model
    if definition.mcp_servers:
        update["mcp_servers"] = {**base.mcp_servers, **definition.mcp_servers}
    if definition.tools is not None:  # never a tool the parent's configuration left out
        update["tools"] = tools_meet(base.tools, list(definition.tools))
    if definition.disallowed_tools:
        update["disallowed_tools"] = [*base.disallowed_tools, *definition.disallowed_tools]
    for field in _TYPE_WINS:
        if getattr(definition, field) is not None:
            update[field] = getattr(definition, field)
    return base.model_copy(update=update) if update else base


def sandbox_for(parent: SandboxProfile, definition: AgentType, name: str, base: AgentConfig) -> SandboxProfile:
    """The sandbox profile an agent of type `name` runs under, started by an agent running under `parent`.

    The type's own profile narrows the parent's (`meet`); a ConfigError if the result is a
    sandbox this platform cannot enforce.
    """
    if definition.sandbox is None:
        return parent
    profile = meet(parent, definition.sandbox, base.working_dir)
    if profile is not parent:
        try:
            check_enforceable(profile, gateway=base.kernel_gateway is not None)
        except ConfigError as exc:
            raise ConfigError(f"agent type {name!r}: {exc}") from None
    return profile


def confine(
    parent: SandboxProfile, definition: AgentType, name: str, base: AgentConfig
) -> tuple[SandboxProfile, AgentType]:
    """The sandbox profile an agent of type `name` runs under, and the definition it runs with.

    As `sandbox_for`, except for a built-in type (`explore`, `plan`, `review`) where the platform
    cannot enforce its profile: it runs under its parent's profile instead of failing, without the
    rules that only the sandbox made safe (`explore`'s cells are then asked, as any other).
    """
    try:
        return sandbox_for(parent, definition, name, base), definition
    except ConfigError:
        if BUILTIN_TYPES.get(name) is not definition:
            raise
        return parent, definition.model_copy(update={"approvals": {}})


def model_options(definition: AgentType, settings: AgentConfig) -> list[ModelOption]:
    """The models a `task` call may pick for a child of this type: the type's `models`, else the config's."""
    return list(definition.models) if definition.models is not None else list(settings.subagent_models)


def pick_model(
    definition: AgentType, name: str, settings: AgentConfig, model: Any, picked: str
) -> ModelOption | str:
    """The model a `task` call's `model` (`picked`) names for a child of type `name`, or the refusal the model reads.

    Allowed: the type's `models` (else `settings.subagent_models`, the calling agent's), and the
    model the child would run on anyway, by name (the type's own, else the caller's: `settings`'
    model string, or `model`, its resolved `Model`).
    """
    options = model_options(definition, settings)
    if definition.model is not None:
        default = ModelOption(model=definition.model, base_url=definition.base_url,
                              api_key_env=definition.api_key_env, model_settings=definition.model_settings)
    else:
        default = ModelOption(model=settings.model if isinstance(settings.model, str) else model,
                              base_url=settings.base_url, api_key_env=settings.api_key_env,
                              model_settings=settings.model_settings)
    found = find_option([*options, default], picked)
    if found is not None:
        return found
    if not options:
        return (f"No models are offered to pick for a `{name}` subagent: no subagent started. Leave out "
                f"`model` (it runs on `{default.name}`).")
    names = ", ".join(f"`{option.name}`" for option in options)
    return (f"The model {picked!r} is not one you may pick for a `{name}` subagent: no subagent started. "
            f"The allowed models are {names} (or leave out `model` for `{default.name}`).")
