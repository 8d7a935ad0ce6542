"""Agent types: Markdown files, config tables, code, precedence, and every error message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from freeact_sub import AgentConfig, AgentType, ConfigError, ConfigWarning
from freeact_sub.config.agent_types import (
    BUILTIN_TYPES,
    compose_system_prompt,
    configure,
    load_agent_file,
    load_agent_types,
    parse_agent_markdown,
    task_tool,
)
from freeact_sub.tools.names import server_may_offer, tool_allowed

REVIEWER = """\
---
name: reviewer
description: Reviews code carefully and reports problems.
model: anthropic:claude-sonnet-4-5
maxTurns: 4
tools: execute_ipython_cell, files_read_*
disallowedTools: [files_write_*]
mcpServers:
  files:
    command: python
    args: [-m, files_server]
approvals:
  files_read_*: allow
  files_write_*: deny
---
You review code. Report each problem with file and line.
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_markdown_file_with_camel_case_fields(tmp_path: Path) -> None:
    name, d = load_agent_file(write(tmp_path, "anything.md", REVIEWER))
    assert name == "reviewer"
    assert d.description == "Reviews code carefully and reports problems."
    assert d.prompt == "You review code. Report each problem with file and line."
    assert d.model == "anthropic:claude-sonnet-4-5" and d.max_turns == 4
    assert d.tools == ["execute_ipython_cell", "files_read_*"] and d.disallowed_tools == ["files_write_*"]
    assert d.mcp_servers["files"].args == ["-m", "files_server"]  # type: ignore[union-attr]
    assert d.approvals == {"files_read_*": "allow", "files_write_*": "deny"}
    assert d.needs_kernel


def test_the_name_defaults_to_the_file_name_and_snake_case_works_too(tmp_path: Path) -> None:
    text = "---\ndescription: Explores.\nmax_turns: 2\ndisallowed_tools: [execute_ipython_cell]\nmodel: inherit\n---\n"
    name, d = load_agent_file(write(tmp_path, "explorer.md", text))
    assert name == "explorer" and d.max_turns == 2 and d.model is None and d.prompt == ""
    assert not d.needs_kernel


def test_opencode_tool_switches_become_disallowed_tools(tmp_path: Path) -> None:
    text = "---\ndescription: Plans.\ntools:\n  files_write: false\n  files_read: true\n---\nPlan only.\n"
    _, d = load_agent_file(write(tmp_path, "plan.md", text))
    assert d.tools is None and d.disallowed_tools == ["files_write"]


CLAUDE_CODE_AGENT = """\
---
name: code-reviewer
description: Reviews code.
tools: Read, Grep, Glob, Bash, WebFetch
model: inherit
color: blue
permissionMode: plan
skills: [pdf]
---
You review code.
"""

OPENCODE_AGENT = """\
---
description: Plans.
mode: subagent
temperature: 0.1
top_p: 0.9
maxSteps: 5
color: "#FF5733"
tools:
  write: false
permission:
  edit: deny
---
Plan only.
"""


def test_claude_code_and_opencode_agent_files_load_what_maps_and_warn_of_the_rest(tmp_path: Path) -> None:
    with pytest.warns(ConfigWarning) as caught:
        name, claude = load_agent_file(write(tmp_path, "code-reviewer.md", CLAUDE_CODE_AGENT))
        _, opencode = load_agent_file(write(tmp_path, "planner.md", OPENCODE_AGENT))
    assert name == "code-reviewer" and claude.color == "blue" and claude.sandbox.name == "read-only"  # type: ignore[union-attr]
    assert claude.tools == ["execute_ipython_cell"] and claude.model is None
    assert opencode.color == "#FF5733" and opencode.model_settings == {"temperature": 0.1, "top_p": 0.9}
    assert opencode.max_turns == 5 and opencode.mode == "subagent" and opencode.disallowed_tools == []
    said = sorted(str(w.message) for w in caught)
    assert said == [
        f"{tmp_path / 'code-reviewer.md'}: skills: ignored (this project has no skills)",
        f"{tmp_path / 'code-reviewer.md'}: tools WebFetch: ignored (Claude Code's or OpenCode's own tools; here the "
        "kernel (execute_ipython_cell) reads, searches, runs and writes)",
        f"{tmp_path / 'planner.md'}: disallowed_tools write: ignored (Claude Code's or OpenCode's own tools; "
        "disallow execute_ipython_cell to take away the kernel)",
        f"{tmp_path / 'planner.md'}: permission: ignored (OpenCode's permissions name OpenCode's tools; use "
        "`approvals` rules)",
    ]


def test_permission_modes_and_own_fields_win_over_translated_ones() -> None:
    _, bypass = parse_agent_markdown(
        "---\ndescription: x\npermissionMode: bypassPermissions\napprovals: {files_*: deny}\ntemperature: 0.5\n"
        "modelSettings: {temperature: 0.2}\nsteps: 3\nmaxTurns: 7\n---\n", "x.md", "x")
    assert bypass.approvals == {"*": "allow", "files_*": "deny"}
    assert bypass.model_settings == {"temperature": 0.2} and bypass.max_turns == 7
    with pytest.warns(ConfigWarning, match=r"x\.md: permissionMode 'acceptEdits': ignored"):
        _, edits = parse_agent_markdown("---\ndescription: x\npermissionMode: acceptEdits\n---\n", "x.md", "x")
    assert edits.approvals == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("description: x\n", r"bad\.md: expected YAML front matter"),
        ("---\ndescription: x\n", r"bad\.md: the front matter is not closed"),
        ("---\ndescription: [x\n---\n", r"bad\.md: the front matter is not valid YAML"),
        ("---\n- a list\n---\n", r"bad\.md: the front matter must be a mapping"),
        ("---\nname: 3\ndescription: x\n---\n", r"bad\.md: name: expected a non-empty string"),
        ("---\nprompt: a\ndescription: x\n---\nbody\n", r"bad\.md: prompt: given both"),
        ("---\nmodel: m\n---\n", r"bad\.md: agent type 'bad':\n  description: Field required"),
        (
            "---\ndescription: x\nmaxTurns: 0\n---\n",
            r"bad\.md: agent type 'bad':\n  maxTurns: .*greater than or equal to 1",
        ),
        ("---\ndescription: x\ndescripton: red\n---\n", r"descripton: Extra inputs are not permitted"),
        ("---\ndescription: x\ncolor: 'red; blink'\n---\n", r"color: String should match pattern"),
        (
            "---\ndescription: x\napprovals: {x: maybe}\n---\n",
            r"approvals\.x: Input should be 'allow', 'ask' or 'deny'",
        ),
        ("---\ndescription: x\nmcpServers: {s: {args: []}}\n---\n", r"mcpServers\.s\.command: Field required"),
    ],
)
def test_every_file_error_names_the_file_and_the_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_agent_file(write(tmp_path, "bad.md", text))


def test_two_files_with_one_name_are_an_error(tmp_path: Path) -> None:
    folder = tmp_path / "project" / ".freeact-sub" / "agents"
    write(folder, "a.md", "---\nname: same\ndescription: x\n---\n")
    write(folder, "b.md", "---\nname: same\ndescription: y\n---\n")
    with pytest.raises(ConfigError, match=r"b\.md: name: 'same' is already defined in .*a\.md"):
        load_agent_types({}, tmp_path / "project", user_dir=tmp_path / "none")


def test_precedence_builtin_user_project_config_code(tmp_path: Path) -> None:
    user, project = tmp_path / "user", tmp_path / "project"
    write(user, "a.md", "---\ndescription: user a\n---\n")
    write(user, "b.md", "---\ndescription: user b\n---\n")
    write(user, "general.md", "---\ndescription: user general\n---\n")
    write(project / ".freeact-sub" / "agents", "b.md", "---\ndescription: project b\n---\n")
    write(project / ".freeact-sub" / "agents", "c.md", "---\ndescription: project c\n---\n")
    write(project / ".freeact-sub" / "agents", "explore.md", "---\ndescription: project explore\n---\n")
    config_file = write(
        tmp_path, "freeact.toml", '[agents.c]\ndescription = "config c"\n[agents.d]\ndescription = "config d"\n'
    )
    config = AgentConfig.load(
        config_file, environ={}, working_dir=project, agents={"d": AgentType(description="code d")}
    )
    types = load_agent_types(config.agents, project, user_dir=user)
    described = {name: d.description for name, d in types.items()}
    assert types["plan"] is BUILTIN_TYPES["plan"] and types["review"] is BUILTIN_TYPES["review"]
    assert types["explore"].sandbox is None and not types["explore"].approvals, "a file replaces a built-in whole"
    del described["plan"], described["review"]
    assert described == {
        "general": "user general",
        "explore": "project explore",
        "a": "user a",
        "b": "project b",
        "c": "config c",
        "d": "code d",
    }


def test_the_user_folder_is_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    write(tmp_path / ".config" / "freeact-sub" / "agents", "mine.md", "---\ndescription: mine\n---\n")
    assert "mine" in load_agent_types({}, tmp_path / "elsewhere")


def test_config_agents_table_in_json_with_errors_naming_the_file(tmp_path: Path) -> None:
    good = write(tmp_path, "good.json", json.dumps({"agents": {"r": {"description": "x", "maxTurns": 3}}}))
    assert AgentConfig.load(good, environ={}).agents["r"].max_turns == 3
    bad = write(tmp_path, "bad.json", json.dumps({"agents": {"r": {"description": "x", "maxTurns": "many"}}}))
    with pytest.raises(
        ConfigError, match=r"invalid .*bad\.json:\n  agents\.r\.maxTurns: Input should be a valid integer"
    ):
        AgentConfig.load(bad, environ={})
    with pytest.raises(ConfigError, match=r"agents\.r\.description: Field required"):
        AgentConfig.validated({"agents": {"r": {}}}, source="code")
    with pytest.raises(ConfigError, match=r"approvals\.x: Input should be 'allow', 'ask' or 'deny'"):
        AgentConfig.validated({"approvals": {"x": "never"}})


def test_code_form_takes_definitions_and_plain_dicts() -> None:
    config = AgentConfig(agents={"a": AgentType(description="A"), "b": {"description": "B", "maxTurns": 2}})
    assert config.agents["a"].description == "A" and config.agents["b"].max_turns == 2


def test_tool_patterns() -> None:
    assert tool_allowed("files_read_text", ["files_read_*"])
    assert not tool_allowed("files_write_text", ["files_*"], ["files_write_*"])
    assert tool_allowed("anything", None)
    assert not tool_allowed("reset_kernel", None, ["reset_*"])


def test_configure_a_type_on_another_provider_brings_its_own_connection() -> None:
    parent = AgentConfig(
        model="openai:gpt-4.1",
        base_url="http://proxy/v1",
        api_key_env="PROXY_KEY",
        model_settings={"temperature": 0.1},
        mcp_servers={"a": {"command": "x"}},
    )
    other = AgentType(
        description="d",
        model="anthropic:claude-haiku-4-5",
        base_url="http://anthropic-proxy",
        mcp_servers={"b": {"command": "y"}},
        max_turns=3,
    )
    config = configure(parent, other, "other")
    assert (config.model, config.base_url, config.api_key_env, config.model_settings) == (
        "anthropic:claude-haiku-4-5",
        "http://anthropic-proxy",
        None,
        None,
    )
    assert sorted(config.mcp_servers) == ["a", "b"] and config.max_turns == 3
    same = configure(
        parent, AgentType(description="d", model_settings={"temperature": 0.9}), "same", model="RESOLVED"
    )
    assert (same.model, same.base_url, same.model_settings) == ("RESOLVED", "http://proxy/v1", {"temperature": 0.9})
    moved = configure(parent, AgentType(description="d", base_url="http://other/v1"), "moved", model="RESOLVED")
    assert (moved.model, moved.base_url, moved.api_key_env) == ("openai:gpt-4.1", "http://other/v1", "PROXY_KEY")


def test_a_base_url_without_a_model_name_to_point_is_an_error() -> None:
    parent = AgentConfig(model=object())
    with pytest.raises(ConfigError, match=r"agent type 'local': base_url: needs a model name"):
        configure(parent, AgentType(description="d", base_url="http://x/v1"), "local")


def test_the_type_prompt_follows_the_code_action_prompt() -> None:
    assert compose_system_prompt("BASE", "") == "BASE"
    assert (
        compose_system_prompt("BASE\n", "Review.", "## MCP tools\n...")
        == "BASE\n\n## Your role\n\nReview.\n\n## MCP tools\n...\n"
    )


def test_the_task_tool_lists_the_types() -> None:
    spec = task_tool(
        {
            "general": AgentType(description="Anything."),
            "reviewer": AgentType(description="Reviews\n code."),
        }
    )
    assert spec.description.endswith("- `general`: Anything.\n- `reviewer`: Reviews code.")
    assert spec.parameters["properties"]["subagent_type"]["default"] == "general"


def test_a_definition_is_frozen_and_keyword_only() -> None:
    definition = AgentType(description="x")
    with pytest.raises(Exception, match="frozen"):
        definition.prompt = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        AgentType("x")  # type: ignore[misc]


def test_parse_markdown_from_text() -> None:
    name, d = parse_agent_markdown("\ufeff---\ndescription: d\n...\nBody.\n", "inline", "fallback")
    assert (name, d.prompt) == ("fallback", "Body.")


TYPES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "agent-types.md"


def test_the_docs_type_examples_load(tmp_path: Path) -> None:
    """The agent types page's Markdown type file, `agents` table and code form are valid as written."""
    import re

    text = TYPES_PAGE.read_text(encoding="utf-8")
    (markdown,) = [b for b in re.findall(r"```markdown\n(.*?)```", text, flags=re.S) if "name: reviewer" in b]
    name, reviewer = parse_agent_markdown(markdown, "agent-types.md", "x")
    assert name == "reviewer" and reviewer.model == "anthropic:claude-sonnet-4-5" and reviewer.prompt
    (table,) = [b for b in re.findall(r"```toml\n(.*?)```", text, flags=re.S) if "[agents.explorer]" in b]
    config = AgentConfig.load(write(tmp_path, "freeact.toml", table), environ={})
    assert config.agents["thinker"].disallowed_tools == ["execute_ipython_cell"]
    assert configure(config, config.agents["explorer"], "explorer").model == "anthropic:claude-haiku-4-5"
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "AgentType(" in b]
    scope: dict[str, object] = {}
    exec(code, scope)
    assert sorted(scope["config"].agents) == ["explorer", "reader"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("tools", "disallowed", "expected"),
    [
        (None, (), {"calc": True, "time": True}),
        (["calc_*"], (), {"calc": True, "time": False}),
        (["calc_add", "execute_ipython_cell"], (), {"calc": True, "time": False}),
        (["*_add"], (), {"calc": True, "time": True}),  # a leading wildcard may match any server's tools
        (["c*"], (), {"calc": True, "time": False}),
        (["execute_ipython_cell"], (), {"calc": False, "time": False}),
        (None, ["time_*"], {"calc": True, "time": False}),
        (None, ["time_get_*"], {"calc": True, "time": True}),  # only some of its tools are ruled out
        (None, ["*"], {"calc": False, "time": False}),
    ],
)
def test_an_mcp_server_is_needed_only_if_one_of_its_tools_could_pass_the_patterns(
    tools: list[str] | None, disallowed: list[str], expected: dict[str, bool]
) -> None:
    assert {server: server_may_offer(server, tools, disallowed) for server in expected} == expected


def test_the_task_tool_lists_the_models_and_offers_model_only_when_there_is_a_choice() -> None:
    types = {
        "general": AgentType(description="Anything."),
        "cheap": AgentType(description="Cheap.", models=["openai:gpt-4.1-mini"]),
    }
    plain = task_tool({"general": types["general"]}, AgentConfig())
    assert "model" not in plain.parameters["properties"] and "Models for" not in plain.description
    spec = task_tool(types, AgentConfig(subagent_models="anthropic:claude-haiku-4-5,openai:o4-mini"))
    assert "model" in spec.parameters["properties"]
    assert spec.description.endswith("takes only those): `anthropic:claude-haiku-4-5`, `openai:o4-mini`")
    assert "- `cheap`: Cheap. (`model`: `openai:gpt-4.1-mini`)" in spec.description


def test_a_model_is_found_by_its_name_with_or_without_the_provider_prefix() -> None:
    from freeact_sub.models.options import ModelOption, find_option

    names = ("anthropic:claude-haiku-4-5", "llama3.2", "openai:x", "google:x")
    options = [ModelOption.model_validate(name) for name in names]
    assert find_option(options, "anthropic:claude-haiku-4-5") is options[0]
    assert find_option(options, "claude-haiku-4-5") is options[0]
    assert find_option(options, "openai:llama3.2") is options[1]  # how a session's index names it
    assert find_option(options, "x") is None, "two candidates pick neither"
    with pytest.raises(ValueError, match="non-empty"):
        ModelOption.model_validate("  ")


def test_the_docs_built_in_and_model_examples_run() -> None:
    """The agent types page's override of a built-in and its allowlist example build the configs they describe."""
    import re

    text = TYPES_PAGE.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (copy,) = [b for b in blocks if 'BUILTIN_TYPES["explore"]' in b]
    scope: dict[str, Any] = {}
    exec(copy, scope)
    explore = scope["config"].agents["explore"]
    assert explore.model == "anthropic:claude-haiku-4-5" and explore.prompt == BUILTIN_TYPES["explore"].prompt
    (allowlist,) = [b for b in blocks if "subagent_models=" in b]
    exec(allowlist, scope)
    config = scope["config"]
    assert [o.name for o in config.subagent_models] == ["anthropic:claude-haiku-4-5", "openai:gpt-4.1-mini"]
    assert config.agents["summarizer"].models[1].base_url == "http://localhost:11434/v1"
    (call,) = [b for b in re.findall(r"```json\n(.*?)```", text, flags=re.S) if '"explore"' in b]
    assert "thoroughness: medium" in json.loads(call)["prompt"]
