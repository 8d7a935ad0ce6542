"""The working folder's `.env`: provider keys and harmless settings only, never a security setting.

A `.env` ships with a repository as easily as an agent type does, and the command reads it on
every run, so it may only set:

- a provider's API key: a variable whose name ends in `_API_KEY` (`OPENAI_API_KEY`,
  `ANTHROPIC_API_KEY`, …) — its value goes only where the person's own settings send requests;
- a `FREEACT_SUB_*` setting in `DOTENV_SETTINGS`: which model, and limits on turns, subagents,
  cost, time and output.

Every other variable is ignored, and one warning line names them: the sandbox, auto-approve,
rules, hooks, MCP servers, the kernel's environment, endpoints, telemetry, keys' names, the gateway, the
working folder, tools, and variables that redirect or inspect provider traffic
(`OPENAI_BASE_URL`, `HTTPS_PROXY`, `SSL_CERT_FILE`, …) come only from the person's own
environment, flags or `--config` file. As before, a variable already set is never overridden,
and `${VAR}` in a value is not expanded (a `.env` cannot copy one of the person's keys into another).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

__all__ = ["DOTENV_REFUSED", "DOTENV_SETTINGS", "dotenv_may_set", "ignored_warning", "load_project_env"]

PREFIX = "FREEACT_SUB_"

DOTENV_SETTINGS: frozenset[str] = frozenset({
    "MODEL", "MODEL_SETTINGS", "MAX_TURNS", "MAX_SUBAGENTS", "MAX_DEPTH", "MAX_COST", "MAX_CHILDREN",
    "EXECUTION_TIMEOUT", "MAX_OUTPUT_CHARS", "MCP_TOOLS", "ENABLE_SUBAGENTS", "KERNEL_POOL_SIZE", "MCP_POOL_SIZE",
    "PRESTART_POOLS",
    "MAX_IMAGES_TO_MODEL", "MAX_IMAGE_BYTES", "DEMO_CHUNK_DELAY",
    "MODEL_RETRIES", "MODEL_RETRY_BACKOFF", "STREAM_IDLE_TIMEOUT", "MAX_MODEL_REQUESTS",
    "CONTEXT_WINDOW", "COMPACT_AT", "COMPACT_KEEP_ROUNDS",
})
"""The `FREEACT_SUB_*` settings (without the prefix) a project's `.env` may set: none of them widens what runs
without the person, where requests go or what a kernel may touch."""

DOTENV_REFUSED: frozenset[str] = frozenset({
    "SANDBOX", "AUTO_APPROVE", "APPROVALS", "HOOKS", "MCP_SERVERS", "KERNEL_ENV", "BASE_URL", "API_KEY_ENV",
    "KERNEL_GATEWAY", "GATEWAY_USERNAME", "AGENTS", "AGENT", "TOOLS", "DISALLOWED_TOOLS", "SUBAGENT_MODELS",
    "SYSTEM_PROMPT", "WORKING_DIR", "IMAGES_DIR", "SAVE_SESSIONS", "TELEMETRY", "TELEMETRY_CONTENT",
    "CHECKPOINTS", "CHECKPOINT_LIMIT", "ISOLATION_COPY", "ISOLATION_COPY_LIMIT",
})
"""`AgentConfig` fields a `.env` may never set (a test checks that every field is in one of the two sets).
`CHECKPOINTS` and `CHECKPOINT_LIMIT` among them: a kernel can write the folder's `.env`, and must not be able to
turn off the checkpoints a person rewinds its work with (or make the next session copy without a limit); nor
`ISOLATION_COPY_LIMIT` (a limit it sets would let the next isolated child's copy fill the disk), nor `ISOLATION_COPY`
(how a child is isolated is the person's choice)."""


def dotenv_may_set(name: str) -> bool:
    """Whether a project's `.env` may set the variable `name`."""
    if name.startswith(PREFIX):
        return name[len(PREFIX):] in DOTENV_SETTINGS
    return name.endswith("_API_KEY") and name.replace("_", "").isalnum()


def load_project_env(working_dir: Path, environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Load `<working_dir>/.env` into `environ` (default `os.environ`): the variables it may set that are not set
    already. Returns the names it set that were ignored (not allowed), in file order."""
    env_file = working_dir / ".env"
    if not env_file.is_file():
        return []
    from dotenv import dotenv_values

    environ = os.environ if environ is None else environ
    ignored: list[str] = []
    for name, value in dotenv_values(env_file, interpolate=False).items():
        if not dotenv_may_set(name):
            ignored.append(name)
        elif value is not None and name not in environ:
            environ[name] = value
    return ignored


def ignored_warning(ignored: list[str]) -> str:
    """The one line (after `freeact-sub: `) that names the variables a `.env` was not allowed to set."""
    names = ", ".join(ignored)
    return (f".env: ignored {names} (a project's .env sets only *_API_KEY and harmless FREEACT_SUB_* settings; "
            "set these in your shell or your --config file)")
