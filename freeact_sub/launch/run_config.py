"""What one `freeact-sub` (or `freeact-sub acp`) run is configured with: the working folder's `.env`, the demo
server, and the `AgentConfig` built from flags, environment variables and `--config FILE` (flags win)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .flags import UsageError

if TYPE_CHECKING:
    from freeact_sub import AgentConfig
    from freeact_sub.demo import DemoServer

__all__ = ["build_config", "load_dotenv", "start_demo"]


def load_dotenv(working_dir: Path, warn: Callable[[str], None]) -> None:
    """The working folder's `.env`: its provider keys and harmless settings; one warning line, given to `warn`,
    names the rest (the names are the file's: `warn` cleans them for where it writes)."""
    from .env_file import ignored_warning, load_project_env

    ignored = load_project_env(working_dir)
    if ignored:
        warn(ignored_warning(ignored))


def start_demo() -> DemoServer:
    from freeact_sub.demo import start_demo_server
    from freeact_sub.demo.server import chunk_delay_from_env

    try:
        delay = chunk_delay_from_env()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return start_demo_server(chunk_delay=delay)


def build_config(args: argparse.Namespace, working_dir: Path, demo: DemoServer | None) -> AgentConfig:
    from freeact_sub import AgentConfig, load_mcp_config
    from freeact_sub.tools import skip_format_checkers

    skip_format_checkers()  # the command's process checks no string formats: jsonschema loads without their libraries

    overrides: dict[str, Any] = {
        "model": args.model,
        "base_url": args.base_url,
        "api_key_env": args.api_key_env,
        "max_subagents": args.max_subagents,
        "max_turns": args.max_turns,
        "model_retries": args.model_retries,
        "max_model_requests": args.max_model_requests,
        "stream_idle_timeout": args.stream_idle_timeout,
        "max_depth": args.max_depth,
        "max_cost": args.max_cost,
        "sandbox": args.sandbox,
        "mcp_tools": args.mcp_tools,
        "working_dir": working_dir,
        "auto_approve": args.auto_approve,
        "telemetry": args.telemetry,
        "telemetry_content": args.telemetry_content,
        "kernel_gateway": args.kernel_gateway,
        "agent": args.agent,
        "subagent_models": args.subagent_models,
    }
    mcp_config = args.mcp_config
    if demo is not None:
        if args.model or args.base_url:
            raise UsageError("--demo uses the scripted demo model: leave out --model and --base-url")
        from freeact_sub.demo import DEMO_MODEL, demo_agent_types, demo_mcp_server

        servers = load_mcp_config(mcp_config) if mcp_config else {}
        overrides.update(
            model=DEMO_MODEL,
            base_url=demo.base_url_for("openai"),
            mcp_servers={"demo": demo_mcp_server(demo), **servers},
            agents=demo_agent_types(demo),  # the reviewer type, on the same server's Anthropic protocol
        )
        mcp_config = None
    config = AgentConfig.load(args.config, mcp_config=mcp_config, gateway_username=args.gateway_username, **overrides)
    if demo is not None and config.api_key_env:
        config.api_key_env = None  # the demo server needs no key, whatever the environment says
    return config
