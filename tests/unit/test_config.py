"""Loading `AgentConfig`: files (JSON, TOML), `FREEACT_SUB_*` variables, overrides, and the errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic_ai.models.function import FunctionModel

from freeact_sub import AgentConfig, ConfigError, load_mcp_config
from freeact_sub.config.agent_config import HttpServerConfig, StdioServerConfig


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_defaults() -> None:
    config = AgentConfig()
    assert config.execution_timeout == 300
    assert config.mcp_servers == {}
    assert config.kernel_env == {}
    assert config.auto_approve is False
    assert config.max_turns is None


def test_json_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "config.json", {"model": "openai:gpt-4.1-mini", "execution_timeout": 12, "max_turns": 4})
    config = AgentConfig.load(path, environ={})
    assert config.model == "openai:gpt-4.1-mini"
    assert config.execution_timeout == 12
    assert config.max_turns == 4


def test_toml_file_with_mcp_servers(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        'model = "anthropic:claude-sonnet-4-5"\n'
        "execution_timeout = 30\n"
        "[kernel_env]\nMY_TOKEN = \"abc\"\n"
        '[mcpServers.calc]\ncommand = "python"\nargs = ["calc.py"]\n'
        '[mcpServers.remote]\nurl = "http://127.0.0.1:9000/mcp"\n',
        encoding="utf-8",
    )
    config = AgentConfig.load(path, environ={})
    assert config.model == "anthropic:claude-sonnet-4-5"
    assert config.kernel_env == {"MY_TOKEN": "abc"}
    assert config.mcp_servers["calc"] == StdioServerConfig(command="python", args=["calc.py"])
    assert isinstance(config.mcp_servers["remote"], HttpServerConfig)
    assert config.mcp_servers["remote"].url == "http://127.0.0.1:9000/mcp"


def test_precedence_file_then_environment_then_overrides(tmp_path: Path) -> None:
    path = _write(tmp_path / "config.json", {"model": "from-file", "execution_timeout": 10, "max_turns": 3})
    environ = {"FREEACT_SUB_MODEL": "from-env", "FREEACT_SUB_EXECUTION_TIMEOUT": "20"}
    config = AgentConfig.load(path, environ=environ, execution_timeout=30, max_turns=None)
    assert config.model == "from-env"  # environment beats the file
    assert config.execution_timeout == 30  # an override beats the environment
    assert config.max_turns == 3  # an override of None leaves the value alone


def test_environment_values_are_converted() -> None:
    environ = {
        "FREEACT_SUB_AUTO_APPROVE": "true",
        "FREEACT_SUB_MAX_SUBAGENTS": "7",
        "FREEACT_SUB_WORKING_DIR": "/tmp/somewhere",
        "FREEACT_SUB_BASE_URL": "http://127.0.0.1:11434/v1",
        "FREEACT_SUB_UNRELATED": "ignored",
        "FREEACT_SUB_MAX_TURNS": "",  # empty means unset
    }
    config = AgentConfig.load(environ=environ)
    assert config.auto_approve is True
    assert config.max_subagents == 7
    assert config.working_dir == Path("/tmp/somewhere")
    assert config.base_url == "http://127.0.0.1:11434/v1"
    assert config.max_turns is None


def test_real_environment_is_read_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FREEACT_SUB_EXECUTION_TIMEOUT", "42")
    assert AgentConfig.load().execution_timeout == 42


def test_a_bad_value_in_a_file_names_the_field_and_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "config.json", {"execution_timeout": "soon"})
    with pytest.raises(ConfigError) as info:
        AgentConfig.load(path, environ={})
    message = str(info.value)
    assert "execution_timeout" in message
    assert str(path) in message


def test_an_unknown_field_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path / "config.json", {"modle": "openai:gpt-4.1"})
    with pytest.raises(ConfigError, match="modle"):
        AgentConfig.load(path, environ={})


def test_a_bad_environment_value_names_the_field() -> None:
    with pytest.raises(ConfigError, match="max_subagents"):
        AgentConfig.load(environ={"FREEACT_SUB_MAX_SUBAGENTS": "0"})


def test_an_override_is_validated() -> None:
    with pytest.raises(ConfigError, match="execution_timeout"):
        AgentConfig.load(environ={}, execution_timeout=-1)


def test_invalid_json_and_toml_name_the_file(tmp_path: Path) -> None:
    broken_json = tmp_path / "config.json"
    broken_json.write_text('{"model": ', encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid JSON") as info:
        AgentConfig.load(broken_json, environ={})
    assert str(broken_json) in str(info.value)
    broken_toml = tmp_path / "config.toml"
    broken_toml.write_text("model = ", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        AgentConfig.load(broken_toml, environ={})


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found") as info:
        AgentConfig.load(tmp_path / "nope.json", environ={})
    assert "nope.json" in str(info.value)


def test_top_level_must_be_an_object(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="object"):
        AgentConfig.load(_write(tmp_path / "config.json", [1, 2]), environ={})


def test_mcp_config_file_in_the_mcpservers_shape(tmp_path: Path) -> None:
    wrapped = _write(
        tmp_path / "mcp.json",
        {
            "mcpServers": {
                "calc": {"command": "python", "args": ["calc.py"], "env": {"A": "1"}, "cwd": "/tmp"},
                "web": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer x"}},
            }
        },
    )
    servers = load_mcp_config(wrapped)
    assert list(servers) == ["calc", "web"]
    calc = servers["calc"]
    assert isinstance(calc, StdioServerConfig)
    assert (calc.command, calc.args, calc.env, calc.cwd) == ("python", ["calc.py"], {"A": "1"}, "/tmp")
    web = servers["web"]
    assert isinstance(web, HttpServerConfig)
    assert web.headers == {"Authorization": "Bearer x"}
    inner = _write(tmp_path / "inner.json", {"calc": {"command": "python"}})
    assert load_mcp_config(inner)["calc"].command == "python"  # type: ignore[union-attr]


def test_mcp_config_is_merged_by_load(tmp_path: Path) -> None:
    mcp = _write(tmp_path / "mcp.json", {"mcpServers": {"calc": {"command": "python"}}})
    config = AgentConfig.load(mcp_config=mcp, environ={})
    assert list(config.mcp_servers) == ["calc"]


@pytest.mark.parametrize(
    ("server", "field"),
    [
        ({"command": "python", "bogus": 1}, "bogus"),
        ({"args": ["x.py"]}, "command"),
        ({"command": "python", "args": "x.py"}, "args"),
        ({"url": "http://x", "command": "python"}, "command"),
    ],
)
def test_a_bad_mcp_server_entry_names_the_server_and_the_field(tmp_path: Path, server: dict, field: str) -> None:
    path = _write(tmp_path / "mcp.json", {"mcpServers": {"calc": server}})
    with pytest.raises(ConfigError) as info:
        load_mcp_config(path)
    message = str(info.value)
    assert f"calc.{field}" in message, message
    assert str(path) in message


def test_mcp_servers_must_be_a_mapping(tmp_path: Path) -> None:
    path = _write(tmp_path / "mcp.json", {"mcpServers": ["calc"]})
    with pytest.raises(ConfigError, match="mcpServers"):
        load_mcp_config(path)


def test_a_model_instance_is_used_as_it_is() -> None:
    async def stream(messages, info):  # pragma: no cover - never called
        yield "x"

    model = FunctionModel(stream_function=stream)
    assert AgentConfig(model=model).resolve_model() is model


def test_base_url_gives_an_openai_compatible_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_ai.models.openai import OpenAIChatModel

    monkeypatch.setenv("LOCAL_LLM_KEY", "secret")
    config = AgentConfig(model="llama3.2", base_url="http://127.0.0.1:11434/v1", api_key_env="LOCAL_LLM_KEY")
    model = config.resolve_model()
    assert isinstance(model, OpenAIChatModel)
    assert model.model_name == "llama3.2"
    assert str(model.base_url).startswith("http://127.0.0.1:11434/v1")


def test_a_missing_api_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCAL_LLM_KEY", raising=False)
    config = AgentConfig(model="llama3.2", base_url="http://127.0.0.1:11434/v1", api_key_env="LOCAL_LLM_KEY")
    with pytest.raises(ConfigError, match="LOCAL_LLM_KEY"):
        config.resolve_model()


def test_an_unknown_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no-such-provider:model"):
        AgentConfig(model="no-such-provider:model").resolve_model()


def test_every_field_can_be_set_from_the_environment() -> None:
    from freeact_sub.config.agent_config import ENV_PREFIX, values_from_environment

    names = list(AgentConfig.model_fields)
    assert len(names) > 30
    found = values_from_environment({ENV_PREFIX + name.upper(): "x" for name in names})
    assert sorted(found) == sorted(names)  # derived from the model: a new field is covered the day it is added
    environ = {
        "FREEACT_SUB_AGENT": "reviewer",
        "FREEACT_SUB_AGENTS": '{"reviewer": {"description": "reviews", "max_turns": 3}}',
        "FREEACT_SUB_ENABLE_SUBAGENTS": "false",
        "FREEACT_SUB_MAX_OUTPUT_CHARS": "5000",
        "FREEACT_SUB_MAX_IMAGES_TO_MODEL": "0",
        "FREEACT_SUB_TOOLS": '["execute_*"]',
        "FREEACT_SUB_APPROVALS": '{"calc_*": "allow"}',
        "FREEACT_SUB_SYSTEM_PROMPT": "[brackets are text here] be brief",
    }
    config = AgentConfig.load(environ=environ)
    assert config.agent == "reviewer" and config.agents["reviewer"].max_turns == 3
    assert config.enable_subagents is False and config.max_output_chars == 5000 and config.max_images_to_model == 0
    assert config.tools == ["execute_*"] and config.approvals == {"calc_*": "allow"}
    assert config.system_prompt == "[brackets are text here] be brief"
    with pytest.raises(ConfigError, match="FREEACT_SUB_TOOLS: not valid JSON"):
        AgentConfig.load(environ={"FREEACT_SUB_TOOLS": "[execute_*"})


def test_vs_codes_servers_shape_is_read_and_a_file_of_neither_shape_says_what_is_expected(tmp_path: Path) -> None:
    vscode = _write(tmp_path / "mcp.json", {
        "inputs": [{"type": "promptString", "id": "key"}],
        "servers": {"calc": {"type": "stdio", "command": "python", "args": ["calc.py"]},
                    "web": {"type": "http", "url": "http://127.0.0.1:8000/mcp"}},
    })
    servers = load_mcp_config(vscode)
    assert isinstance(servers["calc"], StdioServerConfig) and servers["calc"].args == ["calc.py"]
    assert isinstance(servers["web"], HttpServerConfig)
    sse = _write(tmp_path / "sse.json", {"servers": {"old": {"type": "sse", "url": "http://x/sse"}}})
    with pytest.raises(ConfigError, match=r"old\.type: 'sse' is not a transport this client speaks"):
        load_mcp_config(sse)
    neither = _write(tmp_path / "other.json", {"mcp": {"calc": {"command": "python"}}})
    with pytest.raises(ConfigError, match=r"other\.json: expected `mcpServers` \(or VS Code's `servers`\).*'mcp'"):
        load_mcp_config(neither)
