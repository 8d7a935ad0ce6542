"""`AgentConfig.kernel_gateway`: a URL or its settings, from a file, the environment and the CLI flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from freeact_sub import AgentConfig
from freeact_sub.config.agent_config import ConfigError, KernelGatewayConfig
from freeact_sub.terminal.cli import build_parser


def test_a_url_is_enough() -> None:
    config = AgentConfig(kernel_gateway="http://127.0.0.1:8888/")
    assert config.kernel_gateway == KernelGatewayConfig(url="http://127.0.0.1:8888")
    assert config.kernel_gateway.kernel_name == "python3"
    assert AgentConfig().kernel_gateway is None  # local kernels stay the default


def test_a_url_that_is_not_http_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"kernel_gateway\.url"):
        AgentConfig.validated({"kernel_gateway": "gateway.example.org:8888"})


def test_the_flag_or_variable_sets_the_url_and_keeps_the_files_other_settings(tmp_path: Path) -> None:
    file = tmp_path / "freeact.toml"
    file.write_text('[kernel_gateway]\nurl = "http://old:8888"\nkernel_name = "python_kubernetes"\n')
    from_env = AgentConfig.load(file, environ={"FREEACT_SUB_KERNEL_GATEWAY": "http://env:8888"})
    gateway = from_env.kernel_gateway
    assert gateway is not None
    assert (gateway.url, gateway.kernel_name) == ("http://env:8888", "python_kubernetes")
    from_flag = AgentConfig.load(file, environ={}, kernel_gateway="https://flag:9999")
    assert from_flag.kernel_gateway is not None
    assert (from_flag.kernel_gateway.url, from_flag.kernel_gateway.kernel_name) == ("https://flag:9999",
                                                                                     "python_kubernetes")


def test_the_cli_flag() -> None:
    args = build_parser().parse_args(["--kernel-gateway", "http://127.0.0.1:8888"])
    assert args.kernel_gateway == "http://127.0.0.1:8888"


def test_token_and_headers_come_from_the_environment() -> None:
    gateway = KernelGatewayConfig(url="http://g:1", token_env="MY_TOKEN")
    assert gateway.headers({}) == {}
    headers = gateway.headers({"MY_TOKEN": "abc", "JUPYTER_GATEWAY_HEADERS": '{"X-Proxy": "p"}'})
    assert headers == {"Authorization": "token abc", "X-Proxy": "p"}
    with pytest.raises(ConfigError, match="JUPYTER_GATEWAY_HEADERS"):
        gateway.headers({"JUPYTER_GATEWAY_HEADERS": "not json"})


def test_code_tools_need_local_kernels() -> None:
    with pytest.raises(ConfigError, match="mcp_tools"):
        AgentConfig.validated({"kernel_gateway": "http://g:1", "mcp_tools": "code"})
    assert AgentConfig(kernel_gateway="http://g:1", mcp_tools="both").mcp_tools == "both"


def test_the_kernels_user_is_the_configured_one_else_kernel_envs_else_the_hosts() -> None:
    import getpass

    assert KernelGatewayConfig(url="http://g:1").kernel_username() == getpass.getuser()
    assert KernelGatewayConfig(url="http://g:1").kernel_username({"KERNEL_USERNAME": "bob"}) == "bob"
    alice = KernelGatewayConfig(url="http://g:1", username="alice")
    assert alice.kernel_username({"KERNEL_USERNAME": "bob"}) == "alice"


def test_the_username_comes_from_the_file_the_variable_or_the_flag(tmp_path: Path) -> None:
    file = tmp_path / "config.json"
    file.write_text('{"kernel_gateway": {"url": "http://old:8888", "username": "alice"}}')
    from_file = AgentConfig.load(file, environ={})
    assert from_file.kernel_gateway is not None and from_file.kernel_gateway.username == "alice"
    # a URL from the flag keeps the file's user; the variable and then the flag replace it
    from_flag_url = AgentConfig.load(file, environ={}, kernel_gateway="http://new:8888")
    assert from_flag_url.kernel_gateway == KernelGatewayConfig(url="http://new:8888", username="alice")
    from_env = AgentConfig.load(file, environ={"FREEACT_SUB_GATEWAY_USERNAME": "bob"})
    assert from_env.kernel_gateway is not None and from_env.kernel_gateway.username == "bob"
    from_flag = AgentConfig.load(file, environ={"FREEACT_SUB_GATEWAY_USERNAME": "bob"}, gateway_username="carol")
    assert from_flag.kernel_gateway is not None and from_flag.kernel_gateway.username == "carol"
    only_url = AgentConfig.load(None, environ={"FREEACT_SUB_KERNEL_GATEWAY": "http://env:1"}, gateway_username="dan")
    assert only_url.kernel_gateway == KernelGatewayConfig(url="http://env:1", username="dan")
    given = AgentConfig.load(None, environ={}, kernel_gateway=KernelGatewayConfig(url="http://g:1", kernel_name="k"),
                             gateway_username="erin")
    assert given.kernel_gateway == KernelGatewayConfig(url="http://g:1", kernel_name="k", username="erin")
    # without a gateway the variable is ignored (local kernels have no user to name); the flag is an error
    assert AgentConfig.load(None, environ={"FREEACT_SUB_GATEWAY_USERNAME": "bob"}).kernel_gateway is None
    with pytest.raises(ConfigError, match="--gateway-username"):
        AgentConfig.load(None, environ={}, gateway_username="bob")


def test_the_cli_flag_for_the_username() -> None:
    args = build_parser().parse_args(["--kernel-gateway", "http://g:1", "--gateway-username", "alice"])
    assert args.gateway_username == "alice"


def test_a_bad_username_names_the_field() -> None:
    for bad in ("", "  ", " alice", "al\nice"):
        with pytest.raises(ConfigError, match=r"kernel_gateway\.username"):
            AgentConfig.validated({"kernel_gateway": {"url": "http://g:1", "username": bad}})
    with pytest.raises(ConfigError, match=r"kernel_gateway\.username"):
        AgentConfig.load(None, environ={}, kernel_gateway="http://g:1", gateway_username="")


def test_two_different_users_in_the_config_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"kernel_gateway\.username .*kernel_env\.KERNEL_USERNAME"):
        AgentConfig.validated(
            {"kernel_gateway": {"url": "http://g:1", "username": "alice"}, "kernel_env": {"KERNEL_USERNAME": "bob"}}
        )
    gateway = {"url": "http://g:1", "username": "alice"}
    same = AgentConfig(kernel_gateway=gateway, kernel_env={"KERNEL_USERNAME": "alice"})
    assert same.kernel_gateway is not None and same.kernel_gateway.username == "alice"


def test_no_host_user_name_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import getpass

    def unknown() -> str:
        raise OSError("No username set in the environment")

    monkeypatch.setattr(getpass, "getuser", unknown)
    with pytest.raises(ConfigError, match=r"kernel_gateway\.username"):
        KernelGatewayConfig(url="http://g:1").kernel_username()
    assert KernelGatewayConfig(url="http://g:1", username="alice").kernel_username() == "alice"
