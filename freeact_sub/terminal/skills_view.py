"""The instructions and skills of a session in the terminal: the banner's rows, `/help`'s line and `/skills`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .safe_text import clean

if TYPE_CHECKING:
    from freeact_sub import Agent

__all__ = ["instructions_text", "read_files_line", "skills_text", "skills_view"]


def _shown(path: Path, working_dir: Path) -> str:
    try:
        return str(path.relative_to(working_dir))
    except ValueError:
        return str(path).replace(str(Path.home()), "~", 1)


def instructions_text(agent: Agent) -> Text | None:
    """The instruction files read (the banner's `instructions` row); None when there are none."""
    files = agent.tree.prompt_files.instructions
    if not files:
        return None
    return Text(", ".join(clean(_shown(file.path, agent.settings.working_dir)) for file in files))


def skills_text(agent: Agent) -> Text | None:
    """The skills' names, and what was left out (the banner's `skills` row); None when there is nothing to say."""
    files = agent.tree.prompt_files
    if not files.skills and not files.left_out:
        return None
    text = Text(clean(", ".join(files.skills)) or "none", style="bold" if files.skills else "dim")
    if files.skills:
        text.append(" · /skills lists them; the model reads one when a job needs it", style="dim")
    for note in files.left_out:
        text.append("\n" + clean(note), style="yellow")
    return text


def read_files_line(agent: Agent) -> str:
    """`/help`'s line on what was read into the system prompt."""
    files = agent.tree.prompt_files
    told = ", ".join(_shown(file.path, agent.settings.working_dir) for file in files.instructions) or "none"
    return clean(f"Instructions read: {told}. Skills: {len(files.skills)} (/skills lists them).")


def skills_view(agent: Agent) -> RenderableType:
    """`/skills`: every skill with where it is and what it is for; then the files left out, and why."""
    files = agent.tree.prompt_files
    parts: list[RenderableType] = []
    if files.skills:
        table = Table(box=None, header_style="dim", padding=(0, 2, 0, 0), pad_edge=False)
        for column in ("skill", "folder", "description"):
            table.add_column(column, overflow="fold")
        for name, skill in files.skills.items():
            types = agent.tree.agent_types.items()
            preloaded = [type_name for type_name, definition in types if name in definition.skills]
            about = clean(skill.description) + (f" (preloaded by {', '.join(preloaded)})" if preloaded else "")
            table.add_row(Text(clean(name), style="bold"), clean(_shown(skill.folder, agent.settings.working_dir)),
                          Text(about, style="dim"))
        parts.append(table)
    elif files.left_out:  # skills are there but not used (an untrusted folder's, a link, a malformed file)
        parts.append(Text("No skill is in use; these are left out:", style="dim"))
    else:
        parts.append(Text("No skills. Add one as .agents/skills/NAME/SKILL.md (or ~/.config/freeact-sub/skills/).",
                          style="dim"))
    for note in files.left_out:
        parts.append(Text(clean(note), style="yellow"))
    return Group(*parts)
