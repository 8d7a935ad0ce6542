"""How the `freeact-sub` command builds its configuration: flags > environment > config file, and `.env`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from freeact_sub import ConfigError
from freeact_sub.launch import build_config, load_dotenv
from freeact_sub.terminal.arguments import UsageError, build_parser
from freeact_sub.terminal.output import complain
from tests.scripting import no_freeact_sub_environment


@pytest.fixture(autouse=True)
def restored_environment() -> Iterator[None]:
    with no_freeact_sub_environment():
        yield


def _config(tmp_path: Path, *flags: str):
    args = build_parser().parse_args(list(flags))
    return build_config(args, tmp_path, None)


def test_flags_beat_environment_beat_config_file(tmp_path: Path) -> None:
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({"max_subagents": 2, "max_turns": 9, "model": "test"}))
    assert _config(tmp_path, "--config", str(config_file)).max_subagents == 2
    os.environ["FREEACT_SUB_MAX_SUBAGENTS"] = "3"
    assert _config(tmp_path, "--config", str(config_file)).max_subagents == 3
    config = _config(tmp_path, "--config", str(config_file), "--max-subagents", "4")
    assert (config.max_subagents, config.max_turns, config.model) == (4, 9, "test")


def test_auto_approve_comes_from_the_flag_or_the_environment(tmp_path: Path) -> None:
    assert _config(tmp_path).auto_approve is False
    assert _config(tmp_path, "--auto-approve").auto_approve is True
    os.environ["FREEACT_SUB_AUTO_APPROVE"] = "1"
    assert _config(tmp_path).auto_approve is True


def test_a_dotenv_file_in_the_working_directory_is_loaded_without_overriding(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("FREEACT_SUB_MAX_TURNS=7\nFREEACT_SUB_MAX_SUBAGENTS=6\nSOME_API_KEY=from-dotenv\n")
    os.environ["FREEACT_SUB_MAX_SUBAGENTS"] = "1"
    load_dotenv(tmp_path, complain)
    config = _config(tmp_path)
    assert (config.max_turns, config.max_subagents) == (7, 1)
    assert os.environ["SOME_API_KEY"] == "from-dotenv"


def test_mcp_config_flag_and_working_dir(tmp_path: Path) -> None:
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {"calc": {"command": "python", "args": ["calc.py"]}}}))
    config = _config(tmp_path, "--mcp-config", str(servers))
    assert list(config.mcp_servers) == ["calc"] and config.working_dir == tmp_path


def test_demo_refuses_another_model(tmp_path: Path) -> None:
    from freeact_sub.demo import start_demo_server

    with start_demo_server() as server:
        args = build_parser().parse_args(["--demo", "--model", "openai:gpt-4.1"])
        with pytest.raises(UsageError, match="--demo"):
            build_config(args, tmp_path, server)
        config = build_config(build_parser().parse_args(["--demo", "--max-subagents", "2"]), tmp_path, server)
    assert config.base_url == server.base_url and "demo" in config.mcp_servers and config.max_subagents == 2


def test_help_is_quick_to_load() -> None:
    probe = (
        "import sys\n"
        "from freeact_sub.terminal.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = {'pydantic_ai', 'pydantic', 'jupyter_client', 'mcp', 'httpx', 'jsonschema', 'rich',"
        " 'prompt_toolkit'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "--demo" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"  # the heavy libraries load only when a session starts


def test_the_installed_command_runs() -> None:
    command = Path(sys.executable).with_name("freeact-sub")
    if not command.exists():
        pytest.skip("the package is not installed with its console script next to this interpreter")
    done = subprocess.run([str(command), "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("freeact-sub ")


def test_agent_flag_names_the_main_agents_type(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text('[agents.reviewer]\ndescription = "Reviews."\nmaxTurns = 3\n')
    config = _config(tmp_path, "--config", str(config_file), "--agent", "reviewer")
    assert config.agent == "reviewer" and config.agents["reviewer"].max_turns == 3


def test_depth_and_mcp_tools_flags_beat_the_environment(tmp_path: Path) -> None:
    os.environ["FREEACT_SUB_MAX_DEPTH"] = "3"
    os.environ["FREEACT_SUB_MCP_TOOLS"] = "calls"
    config = _config(tmp_path)
    assert (config.max_depth, config.mcp_tools) == (3, "calls")
    config = _config(tmp_path, "--max-depth", "2", "--mcp-tools", "code")
    assert (config.max_depth, config.mcp_tools) == (2, "code")


def test_a_bad_mcp_tools_flag_names_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--mcp-tools", "sometimes"])
    assert "choose from 'calls', 'code', 'both'" in capsys.readouterr().err


def test_demo_config_adds_the_reviewer_type_on_the_demo_servers_anthropic_side(tmp_path: Path) -> None:
    from freeact_sub.demo import start_demo_server

    with start_demo_server() as server:
        config = build_config(build_parser().parse_args(["--demo"]), tmp_path, server)
    reviewer = config.agents["reviewer"]
    assert config.base_url == server.base_url_for("openai") and config.model == "freeact-sub-demo"
    assert (reviewer.model, reviewer.base_url) == ("anthropic:claude-demo", server.base_url_for("anthropic"))


def test_the_demo_server_is_closed_when_the_command_fails_after_starting_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A usage error found after `--demo` started its server (one server, both protocols) closes it."""
    import threading

    from freeact_sub.terminal.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["--demo", "--model", "openai:gpt-4.1", "-p", "hi"]) == 2  # --demo leaves out --model
    assert not [t for t in threading.enumerate() if t.name.startswith("freeact-sub-demo-server:")]


def test_the_sandbox_comes_from_the_flag_the_environment_or_the_config_file(tmp_path: Path) -> None:
    assert _config(tmp_path).sandbox is None  # the default: workspace where it can be enforced
    os.environ["FREEACT_SUB_SANDBOX"] = "offline"
    assert _config(tmp_path).sandbox.name == "offline"
    assert _config(tmp_path, "--sandbox", "read-only").sandbox.name == "read-only"
    config_file = tmp_path / "freeact.json"
    config_file.write_text(json.dumps({"sandbox": {"write": ["."], "network": False}}))
    del os.environ["FREEACT_SUB_SANDBOX"]
    custom = _config(tmp_path, "--config", str(config_file)).sandbox
    assert custom.name == "custom" and not custom.network
    with pytest.raises(ConfigError, match="unknown sandbox profile 'strict'"):
        _config(tmp_path, "--sandbox", "strict")


def test_subagent_models_from_the_config_file_the_environment_and_the_flag(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text(
        'subagent_models = ["anthropic:claude-haiku-4-5", {model = "llama3.2", base_url = "http://127.0.0.1:9/v1"}]\n'
    )
    listed = _config(tmp_path, "--config", str(config_file)).subagent_models
    assert [o.name for o in listed] == ["anthropic:claude-haiku-4-5", "llama3.2"]
    assert listed[1].base_url == "http://127.0.0.1:9/v1"
    os.environ["FREEACT_SUB_SUBAGENT_MODELS"] = "openai:gpt-4.1-mini, anthropic:claude-haiku-4-5"
    names = [o.name for o in _config(tmp_path, "--config", str(config_file)).subagent_models]
    assert names == ["openai:gpt-4.1-mini", "anthropic:claude-haiku-4-5"]
    names = [o.name for o in _config(tmp_path, "--subagent-models", "openai:o4-mini").subagent_models]
    assert names == ["openai:o4-mini"]
