"""The agent type a main agent runs as (`config.agent`): loaded with every other type, checked, applied.

The tree learns every type (built-in, the person's and the project's files, the config's), the
sandbox profile and the hooks; the agent gets its type's definition, its settings (the config with
the type applied) and its approval rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config.agent_types import (
    check_tool_names,
    check_types,
    configure,
    confine,
    load_agent_types,
    project_agent_types,
)
from ..config.definitions import GENERAL, AgentType
from ..config.prompt_files import check_skill_names, load_prompt_files
from ..errors import ConfigError
from ..policy.approvals import ApprovalRules
from ..policy.hooks import Hooks
from ..sandbox import SandboxProfile
from ..sandbox import effective as effective_sandbox

if TYPE_CHECKING:
    from pydantic_ai.models import Model

    from ..config.agent_config import AgentConfig
    from ..config.project_trust import ProjectPowers
    from ..tree.registry import AgentTree

__all__ = ["MainType", "check_cost_budget", "choose_main_type", "untrusted_project"]


@dataclass(frozen=True)
class MainType:
    """What the main agent's type makes of it."""

    name: str
    definition: AgentType
    settings: AgentConfig
    """The config with the type applied (model, tools, MCP servers, turns)."""
    sandbox: SandboxProfile
    rules: ApprovalRules
    """Its type's allow / ask / deny rules, then `config.approvals`."""


def choose_main_type(config: AgentConfig, tree: AgentTree, *, trust_project: bool | None) -> MainType:
    """Load the agent types into `tree` and apply `config.agent`; a bad type file or field is a `ConfigError`."""
    servers = list(config.mcp_servers)
    for field in ("tools", "disallowed_tools"):
        check_tool_names(getattr(config, field) or [], f"config: {field}", servers)
    # an unknown tool name in a type is an error naming its file and field, not a warning when it starts
    project = project_agent_types(config.working_dir)
    types = load_agent_types(config.agents, config.working_dir, trust_project=trust_project, servers=servers,
                             project=project)
    files = load_prompt_files(project, applied=not project.powerful or project.applies(trust_project))
    check_skill_names(types, files)
    name = config.agent or GENERAL
    if name not in types and (inert := _inert_type(project, name)) is not None:
        raise ConfigError(f"agent: the agent type {name!r} ({inert}) is not used: this folder is not trusted")
    if name not in types:
        raise ConfigError(f"agent: unknown agent type {name!r}; the known types are {', '.join(sorted(types))}")
    if types[name].mode == "subagent":
        raise ConfigError(
            f"agent: the agent type {name!r} has mode 'subagent': it runs only through `task`, not as the main "
            "agent (give it mode 'all' to allow both)"
        )
    gateway = config.kernel_gateway is not None
    sandbox, definition = confine(effective_sandbox(config.sandbox, gateway=gateway), types[name], name, config)
    settings = configure(config, definition, name)
    tree.sandbox = sandbox
    tree.hooks = Hooks(config.hooks, cwd=str(config.working_dir))
    check_types(settings, types, sandbox)
    tree.agent_types, tree.prompt_files = types, files
    rules = ApprovalRules([(f"agent type {name}", definition.approvals), ("approvals", config.approvals)])
    return MainType(name=name, definition=definition, settings=settings, sandbox=sandbox, rules=rules)


def _inert_type(project: ProjectPowers, name: str) -> str | None:
    """The file and fields of the project type `name` if it was left out for its powers."""
    for file in project.powerful:
        if file.kind == "type" and file.name == name:
            return f"{file.path}: {', '.join(file.powers)}"
    return None


def check_cost_budget(config: AgentConfig, settings: AgentConfig, model: Model) -> None:
    """A tree's cost budget (`max_cost`) needs a model whose price is known: `ConfigError` if it is not."""
    from ..usage import model_is_priced

    if config.max_cost is not None and not model_is_priced(model):
        raise ConfigError(
            f"max_cost: a cost budget needs a model whose price is known; the price of "
            f"{getattr(model, 'model_name', settings.model)!r} is not (use max_tokens instead)"
        )


def untrusted_project(config: AgentConfig) -> ProjectPowers | None:
    """The working folder's agent type files with powers, if the person does not trust them yet; else None."""
    project = project_agent_types(config.working_dir)
    return None if project.trusted else project
