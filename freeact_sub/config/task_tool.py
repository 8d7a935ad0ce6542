"""The `task` tool as the model sees it: its JSON definition, with the agent types and models it may pick."""

from __future__ import annotations

from collections.abc import Mapping

from ..tools import ToolSpec, builtin_tool
from .agent_config import AgentConfig
from .definitions import AgentType

__all__ = ["task_tool"]


def task_tool(agent_types: Mapping[str, AgentType], settings: AgentConfig | None = None) -> ToolSpec:
    """The `task` tool as the model sees it: its JSON definition, with the agent types and the models it may
    pick for them listed (`settings`: the calling agent's, whose `subagent_models` apply to types without a list)."""
    spec = builtin_tool("task")
    shared = list(settings.subagent_models) if settings is not None else []
    lines = []
    for name, definition in agent_types.items():
        if definition.mode == "primary":
            continue
        line = f"- `{name}`: {' '.join(definition.description.split())}"
        if definition.models is not None and [o.name for o in definition.models] != [o.name for o in shared]:
            names = ", ".join(f"`{option.name}`" for option in definition.models)
            line += f" (`model`: {names})" if names else " (no `model` choice)"
        lines.append(line)
    description = f"{spec.description}\n\nAgent types for `subagent_type` (default `general`):\n" + "\n".join(lines)
    if shared:
        names = ", ".join(f"`{option.name}`" for option in shared)
        description += (f"\n\nModels for `model` (leave it out for the agent type's own model; a type that lists its "
                        f"own above takes only those): {names}")
    parameters = spec.parameters
    if not shared and not any(definition.models for definition in agent_types.values()):  # nothing to choose from
        properties = {k: v for k, v in parameters["properties"].items() if k != "model"}
        parameters = {**parameters, "properties": properties}
    return ToolSpec(name=spec.name, description=description, parameters=parameters)
