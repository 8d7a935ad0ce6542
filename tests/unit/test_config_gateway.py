"""`AgentConfig.kernel_gateway`: a URL or its settings, from a file, the environment and the CLI flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from freeact_sub import AgentConfig
from freeact_sub.config import ConfigError, KernelGatewayConfig
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
