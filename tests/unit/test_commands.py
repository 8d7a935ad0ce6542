"""Command files: where they are found, their front matter, `$ARGUMENTS`, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from freeact_sub import ConfigError
from freeact_sub.agent.direct import split_type_prompt
from freeact_sub.config.commands import load_commands, read_commands


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_project_commands_replace_the_persons_and_arguments_fill_the_template(tmp_path: Path) -> None:
    user, project = tmp_path / "user", tmp_path / "work" / ".freeact-sub" / "commands"
    write(user, "review", "---\ndescription: the person's\n---\nReview $ARGUMENTS\n")
    write(user, "plain", "Summarise the README.\n")
    write(project, "review", "---\ndescription: Review files\nagent: general\nmodel: openai:gpt-4.1-mini\n---\n"
          "Review $ARGUMENTS, then $ARGUMENTS again.\n")
    commands = load_commands(tmp_path / "work", user_dir=user)
    assert sorted(commands) == ["plain", "review"]
    review = commands["review"]
    assert (review.description, review.agent, review.model) == ("Review files", "general", "openai:gpt-4.1-mini")
    assert review.prompt(" src/a.py ") == "Review src/a.py, then src/a.py again."
    assert commands["plain"].prompt() == "Summarise the README."
    assert commands["plain"].prompt("briefly") == "Summarise the README.\n\nbriefly"
    assert commands["plain"].agent is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("---\nagnt: general\n---\nbody\n", r"bad\.md: agnt: unknown field \(use description, agent, model\)"),
        ("---\nmodel: [1, 2]\n---\nbody\n", r"bad\.md: model: Input should be a valid string"),
        ("---\ndescription: x\n", r"bad\.md: the front matter is not closed"),
        ("---\ndescription: x\n---\n\n", r"bad\.md: the body \(the prompt\) is empty"),
        ("---\ndescription: [unclosed\n---\nbody\n", r"bad\.md: the front matter is not valid YAML"),
    ],
)
def test_a_bad_command_file_is_an_error_that_names_the_file_and_the_field(
    tmp_path: Path, text: str, message: str
) -> None:
    write(tmp_path / ".freeact-sub" / "commands", "bad", text)
    with pytest.raises(ConfigError, match=message):
        load_commands(tmp_path, user_dir=tmp_path / "none")


def test_at_type_is_read_only_for_known_types() -> None:
    types = ["general", "explore"]
    assert split_type_prompt("@explore  find the parser\nand more", types) == ("explore", "find the parser\nand more")
    assert split_type_prompt("  @general", types) == ("general", "")
    assert split_type_prompt("@nobody find it", types) == (None, "@nobody find it")
    assert split_type_prompt("mail me@explore.org", types) == (None, "mail me@explore.org")
    assert split_type_prompt("@explorer x", types) == (None, "@explorer x")


def test_each_command_file_is_read_on_its_own_and_every_bad_file_and_field_is_named(tmp_path: Path) -> None:
    folder = tmp_path / ".freeact-sub" / "commands"
    write(folder, "x", "Say x.\n")
    write(folder, "bad1", "---\ndescripton: typo\nagent: [1]\n---\nbody\n")
    write(folder, "bad2", "---\nagent: nobody\n---\n\n")
    files = read_commands(tmp_path, user_dir=tmp_path / "none", types=["general", "explore"])
    assert sorted(files.commands) == ["x"] and files.get("x").prompt() == "Say x."
    assert sorted(files.problems) == ["bad1", "bad2"]
    assert "bad1.md: agent: Input should be a valid string; descripton: unknown field" in files.problems["bad1"]
    assert files.problems["bad2"].endswith(
        "bad2.md: agent: unknown agent type 'nobody'; the known types are explore, general; "
        "the body (the prompt) is empty")
    with pytest.raises(ConfigError, match=r"bad2\.md: agent: unknown agent type 'nobody'"):
        files.get("bad2")
    with pytest.raises(ConfigError, match=r"unknown command 'y'; the commands are /x"):
        files.get("y")
    with pytest.raises(ConfigError) as caught:
        load_commands(tmp_path, user_dir=tmp_path / "none")
    assert "bad1.md" in str(caught.value) and "bad2.md" in str(caught.value)
