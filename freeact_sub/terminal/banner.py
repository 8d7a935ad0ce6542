"""The banner at the start of a session: model, agent, MCP tools, working directory, approvals, keys."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from freeact_sub import BUILTIN_TYPES, __version__
from freeact_sub.tools import BUILTIN_TOOL_NAMES

from .palette import Palette
from .skills_view import instructions_text, skills_text

if TYPE_CHECKING:
    from freeact_sub import Agent, AgentConfig
    from freeact_sub.demo import DemoServer

__all__ = ["agent_types_table", "banner"]


def banner(
    agent: Agent, config: AgentConfig, palette: Palette, *, demo: DemoServer | None, one_shot: bool
) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    model = config.model if isinstance(config.model, str) else type(config.model).__name__
    if demo is not None:
        grid.add_row(
            "model",
            Text.assemble(
                (model, "bold"),
                (" — a scripted demo model, offline, at ", "yellow"),
                demo.base_url_for("openai"),
                (" (it answers the OpenAI and the Anthropic protocol)", "dim"),
            ),
        )
    elif config.base_url:
        grid.add_row("model", Text.assemble((model, "bold"), f" at {config.base_url}"))
    else:
        grid.add_row("model", Text(model, style="bold"))
    subagents = f"up to {config.max_subagents} subagents at once" if config.enable_subagents else "no subagents"
    kind = f" {agent.agent_type}" if agent.agent_type != "general" else ""
    grid.add_row("agent", Text.assemble(palette.label(agent.agent_id), f"{kind} (main) · {subagents}"))
    types = agent.tree.agent_types
    built_in = [name for name, definition in types.items() if BUILTIN_TYPES.get(name) is definition]
    listed = Text.assemble(("built-in ", "dim"), (", ".join(built_in), "bold")) if built_in else Text()
    for name, definition in types.items():  # the user's own (and built-ins they replaced) in full
        if name in built_in:
            continue
        model = definition.model if isinstance(definition.model, str) else "inherited model"
        listed.append(("\n" if listed.plain else "") + name, style="bold")
        listed.append(f" · {model} · {textwrap.shorten(definition.description, 70, placeholder=' …')}", style="dim")
    grid.add_row("agent types", Text.assemble(listed, ("\n/agents shows their models and tools", "dim")))
    if config.subagent_models:
        grid.add_row("subagent models", ", ".join(option.name for option in config.subagent_models))
    mcp_tools = [name for name in agent.tool_names if name not in BUILTIN_TOOL_NAMES]
    grid.add_row("MCP tools", ", ".join(mcp_tools) if mcp_tools else Text("none", style="dim"))
    grid.add_row("working dir", str(config.working_dir))
    for row, text in (("instructions", instructions_text(agent)), ("skills", skills_text(agent))):
        if text is not None:
            grid.add_row(row, text)
    grid.add_row("sandbox", sandbox_text(agent))
    if agent.session_id is not None:
        grid.add_row("session", Text.assemble(agent.session_id, (" · saved as it goes; freeact-sub --resume", "dim")))
    if config.auto_approve or agent.approvals.everything:
        grid.add_row(
            "approvals", Text("AUTO-APPROVE: every action of every agent runs without asking", style="bold red")
        )
    else:
        grid.add_row(
            "approvals",
            "asked for every action: y yes · n no (then a reason, or Enter) · a always for that agent · A all agents"
            " · 1–9 or Tab picks among several",
        )
    if not one_shot:
        grid.add_row("keys", "Enter sends · Alt-Enter or Ctrl-J new line · Ctrl-C cancels a turn · Ctrl-D exits")
        if demo is not None:
            grid.add_row(
                "try",
                Text.assemble(
                    ("show me what you can do", "italic"),
                    " (the tour: code, MCP tools called from code, three parallel subagents, one of them a"
                    " `reviewer` on the Anthropic protocol) · ",
                    ("slow", "italic"),
                    " (a long cell to stop with Ctrl-C) · ",
                    ("one cell", "italic"),
                    " · ",
                    ("tools from code", "italic"),
                    " (MCP tools called from a cell)",
                ),
            )
    return Panel(grid, title=f"freeact-sub {__version__}", title_align="left", border_style="dim", expand=False)


def sandbox_text(agent: Agent) -> Text:
    """The main agent's sandbox profile; `off` in bold (and why, when nobody asked for it)."""
    profile = agent.sandbox
    if profile.enforced:
        return Text(profile.describe())
    if profile.note:
        return Text.assemble(("off", "bold yellow"), (f" — {profile.note}", "yellow"))
    return Text.assemble(("off", "bold red"), (": kernels run with your full rights (--sandbox off)", "red"))


def agent_types_table(agent: Agent) -> RenderableType:
    """`/agents`: every agent type with its model, tools and description."""
    rows: list[tuple[Text, str, str, str]] = []
    shared = agent.settings.subagent_models
    for name, definition in agent.tree.agent_types.items():
        model = definition.model if isinstance(definition.model, str) else "(inherited)"
        options = definition.models if definition.models is not None else shared
        if options:
            model += "; a task may pick " + ", ".join(option.name for option in options)
        tools = ", ".join(definition.tools) if definition.tools is not None else "all of its parent's"
        if definition.disallowed_tools:
            tools += " except " + ", ".join(definition.disallowed_tools)
        if not definition.needs_kernel:
            tools += " (no kernel)"
        if definition.isolation == "copy-on-write":
            tools += ", a workspace of its own"
        if definition.sandbox is not None:
            tools += f", sandbox {definition.sandbox.name}"
            if definition.sandbox.detail():
                tools += f" ({definition.sandbox.detail()})"
        marker = " (main)" if name == agent.agent_type else ""
        rows.append((Text(name + marker, style="bold"), model, tools.strip(), " ".join(definition.description.split())))
    return _TypesTable(rows)


_WIDE = 120
"""From this width the types are a table of four columns; below it, each type's model and tools go on a line of
their own above its description (four columns at 80 cut names and tools mid-word and ran to a dozen lines each)."""


class _TypesTable:
    def __init__(self, rows: list[tuple[Text, str, str, str]]) -> None:
        self.rows = rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if options.max_width >= _WIDE:
            table = Table(box=None, header_style="dim", padding=(0, 2, 0, 0), pad_edge=False)
            for column in ("type", "model", "tools", "description"):
                table.add_column(column, overflow="fold")
            for row in self.rows:
                table.add_row(*row)
            yield table
            return
        grid = Table.grid(padding=(0, 2, 1, 0))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        for name, model, tools, description in self.rows:
            grid.add_row(name, Group(Text.assemble(("model ", "dim"), model, ("  tools ", "dim"), tools),
                                     Text(description, style="dim")))
        yield grid
