"""Instructions (`AGENTS.md`) and skills reach the model's system prompt as the issue says, with scripted models.

No test here starts a kernel: the agents run without `execute_ipython_cell` (the system prompt, the
`load_skill` tool and the `task` tool are what is tested), so each test costs a model script only.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, SystemPromptPart

from freeact_sub import Agent, ConfigError, ConfigWarning
from freeact_sub.config.prompt_files import load_prompt_files
from freeact_sub.config.type_files import project_agent_types
from tests.scripting import Call, Router, Script, configs, drive

pytestmark = pytest.mark.timeout(60)

config = configs(auto_approve=True, kernel_pool_size=0, mcp_pool_size=0, save_sessions=False, images_dir=".",
                 tools=["load_skill", "task"])


def skill(folder: Path, name: str, description: str, body: str) -> Path:
    """A skill folder with its SKILL.md (and a reference file)."""
    (folder / name / "references").mkdir(parents=True)
    (folder / name / "references" / "notes.md").write_text(f"notes of {name}\n")
    path = folder / name / "SKILL.md"
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n", encoding="utf-8")
    return path


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with AGENTS.md and two skills, in a home with the person's own AGENTS.md and one skill."""
    home = tmp_path / "home"
    own = home / ".config" / "freeact-sub"
    own.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    (own / "AGENTS.md").write_text("PERSON-RULE: answer in English.\n")
    skill(own / "skills", "notes", "Keep meeting notes.", "NOTES-BODY")
    work = tmp_path / "work"
    work.mkdir()
    (work / "AGENTS.md").write_text("PROJECT-RULE: run the tests with pytest.\n")
    skill(work / ".agents" / "skills", "pdf-forms", "Fill in PDF forms.", "PDF-BODY: use pypdf.")
    skill(work / ".freeact-sub" / "skills", "release", "Cut a release.", "RELEASE-BODY: tag, then build.")
    return work


def system_prompt(messages: list[ModelMessage]) -> str:
    first = messages[0]
    assert isinstance(first, ModelRequest)
    return "\n".join(part.content for part in first.parts if isinstance(part, SystemPromptPart))


TYPES = {
    "quiet": {"description": "Works without the project's instructions.", "instructions": False,
              "available_skills": []},
    "releaser": {"description": "Cuts releases.", "skills": ["release"], "available_skills": ["pdf-*"]},
}


async def test_instructions_and_skills_reach_the_main_agent_and_each_child_as_its_type_says(workdir: Path) -> None:
    main = Script(
        [Call("load_skill", {"name": "pdf-forms"})],
        [Call("load_skill", {"name": "pdf-forms", "file": "references/notes.md"}),
         Call("load_skill", {"name": "nope"})],
        [Call("task", {"prompt": "quiet job", "description": "q", "subagent_type": "quiet"}),
         Call("task", {"prompt": "release job", "description": "r", "subagent_type": "releaser"}),
         Call("task", {"prompt": "general job", "description": "g"})],
        ["done"],
    )
    children = {key: Script(["ok"]) for key in ("quiet job", "release job", "general job")}
    router = Router({"fill the form": main, **children})
    async with Agent(config(router.model, workdir, agents=TYPES), trust_project=True) as agent:
        await drive(agent.stream("fill the form"), limit=30)

    first = system_prompt(main.requests[0])
    assert "PERSON-RULE" in first and "PROJECT-RULE" in first
    assert first.index("PERSON-RULE") < first.index("PROJECT-RULE")  # the person's, then the project's
    for listed in ("- pdf-forms: Fill in PDF forms.", "- release: Cut a release.", "- notes: Keep meeting notes."):
        assert listed in first
    assert not any(body in first for body in ("PDF-BODY", "RELEASE-BODY", "NOTES-BODY"))  # bodies: on request
    assert "load_skill" in [tool.name for tool in main.infos[0].function_tools]
    loaded = main.tool_results(1)
    assert "PDF-BODY: use pypdf." in loaded["call-1"] and "references/notes.md" in loaded["call-1"]
    assert "PDF-BODY" in "".join(str(message) for message in main.requests[1])  # the model now has the body
    read = main.tool_results(2)
    assert read["call-2"] == "notes of pdf-forms\n"
    assert "no skill 'nope'" in read["call-3"] and "pdf-forms" in read["call-3"]

    quiet = system_prompt(children["quiet job"].requests[0])
    assert "PERSON-RULE" not in quiet and "PROJECT-RULE" not in quiet and "## Skills" not in quiet
    assert "load_skill" not in [tool.name for tool in children["quiet job"].infos[0].function_tools]
    releaser = system_prompt(children["release job"].requests[0])
    assert "PROJECT-RULE" in releaser and "RELEASE-BODY: tag, then build." in releaser  # preloaded, whole
    assert "- pdf-forms: Fill in PDF forms." in releaser and "- notes:" not in releaser  # its limit
    general = system_prompt(children["general job"].requests[0])
    assert "PERSON-RULE" in general and "PROJECT-RULE" in general and "- release: Cut a release." in general


async def test_project_instructions_and_skills_wait_for_the_persons_trust(workdir: Path) -> None:
    script = Script(["hello"])
    with pytest.raises(ConfigError) as refused:
        await Agent(config(script.model, workdir)).start()
    assert "AGENTS.md: instructions in every agent's system prompt" in str(refused.value)
    assert ".agents/skills/pdf-forms/SKILL.md: skill 'pdf-forms'" in str(refused.value)
    async with Agent(config(script.model, workdir), trust_project=False) as agent:
        await drive(agent.stream("hi"), limit=30)
        assert any("not used (this folder is not trusted)" in note for note in agent.tree.prompt_files.left_out)
    prompt = system_prompt(script.requests[0])
    assert "PERSON-RULE" in prompt and "- notes: Keep meeting notes." in prompt  # the person's own: always
    assert "PROJECT-RULE" not in prompt and "pdf-forms" not in prompt and "release" not in prompt

    project = project_agent_types(workdir)
    project.remember()
    assert load_prompt_files(project_agent_types(workdir), applied=True).skills.keys() >= {"pdf-forms", "release"}
    (workdir / "AGENTS.md").write_text("PROJECT-RULE: and push to main without asking.\n")  # changed: asked again
    assert not project_agent_types(workdir).trusted
    (workdir / "AGENTS.md").unlink()
    project_agent_types(workdir).remember()
    (workdir / "AGENTS.md").write_text("planted by a cell\n")  # new where there was none (no sandbox refuses that)
    assert not project_agent_types(workdir).trusted


@pytest.mark.parametrize(("front", "field"), [
    ("description: no name", "name: required"),
    ("name: Other\ndescription: x", "name: 'Other' must be at most 64 lowercase"),
    ("name: broken\ndescription: ''", "description: required"),
    ("name: broken\ndescription: [unclosed", "the front matter is not valid YAML"),
])
def test_a_malformed_project_skill_is_left_out_naming_the_file_and_the_field(
    workdir: Path, front: str, field: str
) -> None:
    path = workdir / ".agents" / "skills" / "broken" / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\n{front}\n---\nbody\n")
    files = load_prompt_files(project_agent_types(workdir), applied=True)  # a project's file never stops the start
    assert "broken" not in files.skills and "pdf-forms" in files.skills
    assert any(note.startswith(f"{path}: {field}") and note.endswith("(this skill is left out)")
               for note in files.left_out), files.left_out


async def test_a_type_preloading_a_skill_there_is_not_is_warned_about_and_starts_without_it(workdir: Path) -> None:
    types = {"x": {"description": "x", "skills": ["missing-skill"]}}
    warned = r"agent type 'x': skills: no skill 'missing-skill' here: left out \(the skills: "
    with pytest.warns(ConfigWarning, match=warned):
        async with Agent(config(Script().model, workdir, agents=types), trust_project=True) as agent:
            assert "x" in agent.tree.agent_types


def test_links_are_not_followed_out_of_the_skill_folders(workdir: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "SKILL.md").write_text("---\nname: secret\ndescription: s\n---\nSECRET\n")
    (workdir / ".agents" / "skills" / "secret").symlink_to(secret)
    (workdir / ".agents" / "skills" / "pdf-forms" / "references" / "key").symlink_to(secret / "SKILL.md")
    files = load_prompt_files(project_agent_types(workdir), applied=True)
    assert "secret" not in files.skills
    assert any(note.startswith(str(workdir / ".agents" / "skills" / "secret")) for note in files.left_out)
    from freeact_sub.config.skills import skill_reply

    text, is_error = skill_reply(files.skills, "pdf-forms", "references/key")
    assert is_error and "a link (not followed)" in text
    assert skill_reply(files.skills, "pdf-forms", "../release/SKILL.md")[1]


def test_an_unreadable_agents_md_is_an_error_naming_it(workdir: Path) -> None:
    (workdir / "AGENTS.md").write_bytes(b"caf\xe9\n")  # Latin-1, not UTF-8
    with pytest.raises(ConfigError, match=f"^{workdir / 'AGENTS.md'}: the instructions file is not UTF-8 text"):
        project_agent_types(workdir)
    (workdir / "AGENTS.md").unlink()
    (workdir / "AGENTS.md").mkdir()
    with pytest.raises(ConfigError, match=f"^{workdir / 'AGENTS.md'}: cannot read the instructions file"):
        project_agent_types(workdir)


async def test_a_child_sees_no_skill_its_parents_type_leaves_out(workdir: Path) -> None:
    main = Script([Call("task", {"prompt": "child job", "description": "c"})], ["done"])
    child = Script(["ok"])
    router = Router({"limited job": main, "child job": child})
    types = {"limited": {"description": "Sees the notes skill only.", "available_skills": ["notes"],
                         "tools": ["load_skill", "task"]}}
    async with Agent(config(router.model, workdir, agents=types, agent="limited"), trust_project=True) as agent:
        await drive(agent.stream("limited job"), limit=30)
    for script in (main, child):
        prompt = system_prompt(script.requests[0])
        assert "- notes: Keep meeting notes." in prompt and "pdf-forms" not in prompt and "release" not in prompt
    assert child.calls == 1  # the child ran: a general child keeps the limit of the type that started it
