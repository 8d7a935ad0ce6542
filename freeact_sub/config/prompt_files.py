"""The instructions and skills of a run: read once when the main agent starts, then put into each agent's prompt.

Progressive disclosure: every skill an agent sees is in its system prompt by name and description
only; the model reads a skill's instructions with the `load_skill` tool when a job needs them (the
host answers from the text it read at the start, the text the person trusted). A type's preloaded
`skills` are in its prompt whole; `available_skills` limits which it sees; `instructions: false`
leaves `AGENTS.md` out.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from ..errors import ConfigError, ConfigWarning
from .definitions import AgentType
from .project_trust import ProjectFile, ProjectPowers, text_powers
from .skills import (
    PROJECT_SKILL_FOLDERS,
    Instructions,
    Skill,
    by_name,
    parse_skill,
    read_instructions,
    read_skills,
    skill_texts,
    user_config_dir,
)

__all__ = ["PromptFiles", "check_skill_names", "load_prompt_files", "project_text_files"]

_SKILLS_HEAD = """\
## Skills

A skill holds instructions for one kind of job. Before you start a job that a skill's description
fits, call `load_skill` with its name and follow what it says (`load_skill` with `file` reads one of
the files in its folder). The skills:
"""


@dataclass(frozen=True)
class PromptFiles:
    """The instructions and skills every agent of a run may get (the person's and, if used, the project's)."""

    instructions: tuple[Instructions, ...] = ()
    """The person's `AGENTS.md`, then the project's."""
    skills: Mapping[str, Skill] = field(default_factory=dict)
    """Every skill by name."""
    left_out: tuple[str, ...] = ()
    """What was not read, and why (a link; the project's files while the folder is not trusted)."""

    def seen_by(self, definition: AgentType | None,
                ancestors: Iterable[AgentType | None] = ()) -> dict[str, Skill]:
        """The skills an agent of this type sees (listed, loadable), its preloaded ones included.

        `ancestors`: the types of its parent, its parent's parent, …: a child sees no skill an ancestor's
        `available_skills` leaves out (its own preloaded ones aside)."""
        preloaded = set(definition.skills) if definition is not None else set()
        limits = [kind.available_skills for kind in (definition, *ancestors)
                  if kind is not None and kind.available_skills is not None]
        return {name: skill for name, skill in self.skills.items()
                if name in preloaded or all(any(fnmatchcase(name, p) for p in limit) for limit in limits)}

    def sections(self, definition: AgentType | None, *, can_load: bool,
                 seen: Mapping[str, Skill] | None = None) -> tuple[str, str]:
        """`(instructions, skills)`: the system prompt's sections for an agent of this type ('' for none).

        `can_load`: the agent has the `load_skill` tool (without it, skills are not listed, only preloaded);
        `seen`: the skills it sees (default: `seen_by(definition)`)."""
        wants = definition is None or definition.instructions
        told = "\n\n".join(_instructions_text(file) for file in self.instructions) if wants else ""
        preloaded = definition.skills if definition is not None else []
        seen = seen if seen is not None else self.seen_by(definition)
        listed = [skill for name, skill in seen.items() if name not in preloaded] if can_load else []
        parts = [_SKILLS_HEAD + "\n".join(f"- {skill.name}: {skill.description}" for skill in listed)] if listed else []
        parts += [_preloaded_text(self.skills[name]) for name in preloaded if name in self.skills]
        return (f"## Instructions\n\n{told}" if told else ""), "\n\n".join(parts)


def _instructions_text(file: Instructions) -> str:
    where = (f"{file.path} (the user's own, for every project)" if file.source == "user"
             else "AGENTS.md in the working folder (this project's)")
    return f"From {where}:\n\n{file.text.strip()}"


def _preloaded_text(skill: Skill) -> str:
    return f"## Skill `{skill.name}`\n\n{skill.body.strip()}\n\n(Its folder: {skill.folder})"


def project_text_files(working_dir: Path, left_out: list[str] | None = None) -> list[ProjectFile]:
    """The project's `AGENTS.md` and skill files, each with what it can do (for project trust)."""
    notes = left_out if left_out is not None else []
    files = []
    if (told := read_instructions(working_dir, "project", notes)) is not None:
        files.append(ProjectFile(path=told.path, text=told.text, name="AGENTS.md", kind="instructions",
                                 powers=text_powers("instructions", "AGENTS.md")))
    for folder in PROJECT_SKILL_FOLDERS:
        for name, relative, text in skill_texts(working_dir, folder, notes):  # parsed only once they are used
            files.append(ProjectFile(path=working_dir / relative, text=text, name=name, kind="skill",
                                     powers=text_powers("skill", name)))
    return files


def load_prompt_files(project: ProjectPowers, *, applied: bool, user_dir: Path | None = None) -> PromptFiles:
    """The person's instructions and skills, then the project's (from `project`, as hashed) when `applied`."""
    base = user_dir if user_dir is not None else user_config_dir()
    notes: list[str] = []
    instructions = [told] if (told := read_instructions(base, "user", notes)) is not None else []
    skills = read_skills(base, "skills", "user", notes)
    project_texts = [file for file in project.files if file.kind != "type"]
    project_text_files(project.folder, notes)  # the project's links, named (its files come from `project`)
    if applied:
        for file in project_texts:
            if file.kind == "instructions":
                instructions.append(Instructions(path=file.path, text=file.text, source="project"))
            else:
                try:
                    name, description, body = parse_skill(file.text, str(file.path), file.path.parent.name)
                except ConfigError as exc:  # a project's file never stops the start: it is left out, and named
                    notes.append(f"{exc} (this skill is left out)")
                    continue
                skills.append(Skill(name=name, description=description, body=body, text=file.text,
                                    folder=file.path.parent, source="project", root=project.folder))
    elif project_texts:
        shown = ", ".join(str(file.path.relative_to(project.folder)) for file in project_texts)
        notes.append(f"{shown}: not used (this folder is not trusted)")
    return PromptFiles(instructions=tuple(instructions), skills=by_name(skills), left_out=tuple(dict.fromkeys(notes)))


def check_skill_names(types: Mapping[str, AgentType], files: PromptFiles) -> None:
    """A `ConfigWarning` for each skill a type preloads that is not here; it names the type, the field and the
    skills there are. The type starts without it: an agent file written for Claude Code may name skills that live
    in Claude Code's own folders, and that should not stop every start."""
    for name, definition in types.items():
        for wanted in definition.skills:
            if wanted not in files.skills:
                known = ", ".join(sorted(files.skills)) or "none"
                warnings.warn(f"agent type {name!r}: skills: no skill {wanted!r} here: left out (the skills: {known})",
                              ConfigWarning, stacklevel=2)
