"""The flags every front end that starts an agent from a command line shares: the model, limits, MCP
servers, the sandbox, agent types, approvals and trust, the offline demo; and the working folder."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

__all__ = ["UsageError", "add_config_flags", "add_demo_flag", "working_dir_from"]


class UsageError(Exception):
    """A problem with the command line, the configuration or the environment: one line, exit code 2."""


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that build the `AgentConfig` (`build_config`): `freeact-sub` and `freeact-sub acp` take the same."""
    parser.add_argument(
        "--model",
        help="a pydantic-ai model string (openai:gpt-4.1, anthropic:…), or with --base-url the server's model name",
    )
    parser.add_argument("--base-url", help="base URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp)")
    parser.add_argument("--api-key-env", metavar="NAME", help="environment variable holding the API key for --base-url")
    parser.add_argument("--mcp-config", metavar="FILE", help='MCP servers, a JSON file in the "mcpServers" shape')
    parser.add_argument("--max-subagents", type=int, metavar="N", help="how many subagents may run at once")
    parser.add_argument("--max-turns", type=int, metavar="N", help="limit on model rounds per prompt")
    parser.add_argument(
        "--model-retries", type=int, metavar="N",
        help="how often a model request that failed before it acted is retried (429, 529, 5xx, a dropped stream)",
    )
    parser.add_argument(
        "--max-model-requests", metavar="N",
        help="how many model requests all agents have in flight at once ('none': no bound)",
    )
    parser.add_argument(
        "--stream-idle-timeout", metavar="S",
        help="seconds a model's stream may stay silent before the request is retried ('none': no limit)",
    )
    parser.add_argument(
        "--max-depth", type=int, metavar="N", help="how deep subagents may nest (1: only the main agent starts them)"
    )
    parser.add_argument(
        "--max-cost", type=float, metavar="USD", help="a budget for the session: all agents stop once they cost this"
    )
    parser.add_argument(
        "--mcp-tools",
        choices=("calls", "code", "both"),
        help="offer MCP tools as tool calls, as Python functions in the kernel, or both (the default)",
    )
    parser.add_argument("--working-dir", metavar="DIR", help="the kernels' working directory (default: here)")
    parser.add_argument(
        "--kernel-gateway",
        metavar="URL",
        help="run every kernel on this Jupyter Kernel/Enterprise Gateway (token in $JUPYTER_GATEWAY_AUTH_TOKEN)",
    )
    parser.add_argument(
        "--gateway-username",
        metavar="NAME",
        help="the user the gateway starts kernels for (KERNEL_USERNAME; default: yours; Enterprise Gateway checks "
        "it; also FREEACT_SUB_GATEWAY_USERNAME)",
    )
    parser.add_argument(
        "--subagent-models",
        metavar="MODELS",
        help="models the agent may pick for a subagent, comma-separated "
        "(anthropic:claude-haiku-4-5,openai:gpt-4.1-mini; also FREEACT_SUB_SUBAGENT_MODELS)",
    )
    parser.add_argument("--config", metavar="FILE", help="a JSON or TOML file with AgentConfig fields")
    parser.add_argument(
        "--agent",
        metavar="NAME",
        help="run the main agent as this agent type (from .freeact-sub/agents/*.md, ~/.config/freeact-sub/agents/, "
        "or the config's agents table)",
    )
    parser.add_argument(
        "--sandbox",
        metavar="PROFILE",
        help="what the agents' code may touch: workspace (default: no secrets, writes only in the working dir), "
        "offline (no network either), packages (network: the Python package index only), read-only, or off "
        "(also FREEACT_SUB_SANDBOX)",
    )
    parser.add_argument(
        "--auto-approve",
        action="store_true",
        default=None,
        help="run every action of every agent without asking (also FREEACT_SUB_AUTO_APPROVE=1)",
    )
    parser.add_argument(
        "--telemetry",
        action="store_true",
        default=None,
        help="export OpenTelemetry traces and metrics over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT, default "
        "http://localhost:4318; needs freeact-sub[telemetry]); also on when that variable is set",
    )
    parser.add_argument(
        "--telemetry-content",
        action="store_true",
        default=None,
        help="with telemetry: put prompts, code and outputs on the spans",
    )
    parser.add_argument(
        "--trust-project",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="use (or, with --no-trust-project, leave out) this folder's agent types that carry hooks, endpoints, "
        "keys' names, MCP servers, allow rules or a wider sandbox, without asking (default: ask once per folder)",
    )


def add_demo_flag(parser: argparse.ArgumentParser) -> None:
    """`--demo`: the scripted demo model on 127.0.0.1 instead of a provider (no key needed)."""
    parser.add_argument("--demo", action="store_true", help="offline demo: a scripted model, real kernels and MCP")


def working_dir_from(flag: str | None) -> Path:
    raw = flag or os.environ.get("FREEACT_SUB_WORKING_DIR") or os.getcwd()
    path = Path(raw).expanduser().resolve()
    if not path.is_dir():
        raise UsageError(f"working directory {raw}: not a directory")
    return path
