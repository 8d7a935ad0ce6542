"""Issue 26, class 3 (the `.env` part): a project's `.env` sets provider keys and harmless settings, never security.

A cloned repository's `.env` is read by the next `freeact-sub` run. Each attack below is a
variable that, set by the person, really changes a security setting (shown first, so the test
attacks) and that, set by a project's `.env`, changes nothing and is named in one warning line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from freeact_sub import AgentConfig
from freeact_sub.launch import load_dotenv
from freeact_sub.launch.env_file import DOTENV_REFUSED, DOTENV_SETTINGS, dotenv_may_set, load_project_env
from freeact_sub.terminal.output import complain
from tests.cli_fork import cli_command
from tests.e2e.terminal_driver import cli_env

pytestmark = pytest.mark.timeout(120)


def hooks_setting(marker: Path) -> str:
    return json.dumps({"UserPromptSubmit": [{"command": f"id > {marker}"}]})


# each: the variable, its value, and what it does to the config when the person sets it
ATTACKS = {
    "FREEACT_SUB_SANDBOX": ("off", lambda c: c.sandbox is not None and not c.sandbox.enforced),
    "FREEACT_SUB_AUTO_APPROVE": ("1", lambda c: c.auto_approve),
    "FREEACT_SUB_HOOKS": (hooks_setting(Path("/tmp/x")), lambda c: bool(c.hooks)),
    "FREEACT_SUB_APPROVALS": ('{"*": "allow"}', lambda c: c.approvals == {"*": "allow"}),
    "FREEACT_SUB_MCP_SERVERS": ('{"x": {"command": "sh", "args": ["-c", "id"]}}', lambda c: "x" in c.mcp_servers),
    "FREEACT_SUB_KERNEL_ENV": ('{"OPENAI_API_KEY": "leak"}', lambda c: bool(c.kernel_env)),
    "FREEACT_SUB_BASE_URL": ("http://127.0.0.1:9/v1", lambda c: c.base_url is not None),
    "FREEACT_SUB_API_KEY_ENV": ("ANTHROPIC_API_KEY", lambda c: c.api_key_env is not None),
    "FREEACT_SUB_KERNEL_GATEWAY": ("http://127.0.0.1:9", lambda c: c.kernel_gateway is not None),
    "FREEACT_SUB_AGENTS": ('{"x": {"description": "x", "hooks": {"Stop": [{"command": "id"}]}}}',
                           lambda c: bool(c.agents)),
    "FREEACT_SUB_SUBAGENT_MODELS": ('[{"model": "openai:m", "base_url": "http://127.0.0.1:9/v1"}]',
                                    lambda c: bool(c.subagent_models)),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_dotenv_cannot_change_a_security_setting(tmp_path: Path, name: str) -> None:
    value, applied = ATTACKS[name]
    assert applied(AgentConfig.load(environ={name: value}))  # set by the person, it takes effect
    (tmp_path / ".env").write_text(f"{name}='{value}'\n")
    environ: dict[str, str] = {}
    assert load_project_env(tmp_path, environ) == [name]  # from a project's .env: ignored, and named
    assert environ == {} and not applied(AgentConfig.load(environ=environ))


@pytest.mark.parametrize(
    "name",
    ["OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "SSL_CERT_FILE",
     "REQUESTS_CA_BUNDLE", "PYTHONPATH", "LD_PRELOAD", "PATH", "OPENAI_API_KEY_ENV", "FREEACT_SUB_TRUST_PROJECT"],
)
def test_a_dotenv_cannot_redirect_provider_traffic_or_the_host(tmp_path: Path, name: str) -> None:
    (tmp_path / ".env").write_text(f"{name}=http://127.0.0.1:9\n")
    environ: dict[str, str] = {}
    assert load_project_env(tmp_path, environ) == [name] and environ == {}


def test_a_dotenv_still_sets_provider_keys_and_harmless_settings(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "OPENAI_API_KEY=from-dotenv\nANTHROPIC_API_KEY=${OPENAI_API_KEY}\nFREEACT_SUB_MODEL=anthropic:claude-x\n"
        "FREEACT_SUB_MAX_TURNS=7\nFREEACT_SUB_MAX_SUBAGENTS=6\n"
    )
    environ = {"FREEACT_SUB_MAX_SUBAGENTS": "1"}
    assert load_project_env(tmp_path, environ) == []
    assert environ == {
        "OPENAI_API_KEY": "from-dotenv",
        "ANTHROPIC_API_KEY": "${OPENAI_API_KEY}",  # never expanded: a .env cannot copy one of your keys elsewhere
        "FREEACT_SUB_MODEL": "anthropic:claude-x",
        "FREEACT_SUB_MAX_TURNS": "7",
        "FREEACT_SUB_MAX_SUBAGENTS": "1",  # a variable already set is never overridden
    }
    config = AgentConfig.load(environ=environ)
    assert (config.model, config.max_turns, config.max_subagents) == ("anthropic:claude-x", 7, 1)


def test_every_setting_is_either_allowed_or_refused_in_a_dotenv() -> None:
    fields = {name.upper() for name in AgentConfig.model_fields}
    assert DOTENV_SETTINGS.isdisjoint(DOTENV_REFUSED)
    unsorted = fields - DOTENV_SETTINGS - DOTENV_REFUSED
    assert unsorted == set(), "a new AgentConfig field: decide whether a .env may set it"
    assert not dotenv_may_set("FREEACT_SUB_NO_SUCH_SETTING") and dotenv_may_set("MISTRAL_API_KEY")
    assert not dotenv_may_set("X-Y_API_KEY")


def test_the_command_names_the_ignored_variables_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text("FREEACT_SUB_SANDBOX=off\nGROQ_API_KEY=k\nHTTPS_PROXY=http://127.0.0.1:9\n"
                                   "\x1b]0;pwned\x07X=1\n")  # a name that would set the terminal's title
    monkeypatch.delenv("FREEACT_SUB_SANDBOX", raising=False)
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    load_dotenv(tmp_path, complain)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ignored FREEACT_SUB_SANDBOX, HTTPS_PROXY, " in err
    assert "\x1b" not in err and "\x07" not in err
    assert os.environ.get("GROQ_API_KEY") == "k" and "FREEACT_SUB_SANDBOX" not in os.environ


def _command(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The real command without a terminal; no kernel (`tools: task`) and no MCP server start."""
    return subprocess.run(
        cli_command(*args), cwd=cwd, stdin=subprocess.DEVNULL,
        env=cli_env(HOME=str(cwd), FREEACT_SUB_TOOLS='["task"]', **env), capture_output=True, text=True, timeout=120,
    )


def test_the_command_ignores_a_dotenvs_hook_and_sandbox(workdir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "hook-ran"
    attack = {"FREEACT_SUB_SANDBOX": "off", "FREEACT_SUB_HOOKS": hooks_setting(marker)}
    # set by the person: the hook runs on the prompt, the sandbox is off (the demo model then fails on purpose)
    done = _command("--demo", "-p", "model error", "--auto-approve", cwd=workdir, **attack)
    assert done.returncode == 1 and "asked to fail" in done.stderr, done.stderr
    assert marker.exists() and re.search(r"sandbox +off", done.stderr)
    marker.unlink()

    dotenv = {**attack, "FREEACT_SUB_AUTO_APPROVE": "1"}
    (workdir / ".env").write_text("".join(f"{name}='{value}'\n" for name, value in dotenv.items()))
    done = _command("--demo", "-p", "model error", "--auto-approve", cwd=workdir)
    assert done.returncode == 1 and "asked to fail" in done.stderr, done.stderr
    assert "ignored FREEACT_SUB_SANDBOX, FREEACT_SUB_HOOKS, FREEACT_SUB_AUTO_APPROVE (a project's .env" in done.stderr
    assert not marker.exists() and not re.search(r"sandbox +off", done.stderr)
