"""`@freeact-sub` in JupyterLab's chat: a Jupyter AI persona that starts `freeact-sub acp`.

Installed with the `jupyter-ai` extra (`pip install '.[jupyter-ai]'` in the clone), which registers it under
Jupyter AI's `jupyter_ai.personas` entry point. It is `jupyter-ai-acp-client`'s ACP persona with this
command: the agent process is started once per JupyterLab server and serves every chat (one ACP
session each), configured as the terminal command is (the server's environment, `FREEACT_SUB_*`
variables, the chat folder's `.env` and agent types). Flags for it go in `FREEACT_SUB_ACP_ARGS`, e.g.
`FREEACT_SUB_ACP_ARGS=--demo` for the offline demo, or `--config ~/freeact.toml --sandbox offline`.

A chat in a folder whose `AGENTS.md`, skills or agent types with powers wait for the person's trust (new, or
changed since) is asked in the chat, by the agent, with a card of its own before its first answer (`trust.py`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona
from jupyter_ai_persona_manager import PersonaDefaults

__all__ = ["FreeactSubPersona", "acp_command"]

NAME = "freeact-sub"
_MENTION = re.compile(rf"(?<![\w-])@{re.escape(NAME)}\b:?\s*")


def acp_command(environ: dict[str, str] | None = None) -> list[str]:
    """The agent's command line: this Python's `freeact-sub acp`, plus `FREEACT_SUB_ACP_ARGS`."""
    extra = (environ if environ is not None else os.environ).get("FREEACT_SUB_ACP_ARGS", "")
    return [sys.executable, "-m", "freeact_sub.cli", "acp", *shlex.split(extra)]


class FreeactSubPersona(BaseAcpPersona):
    """The persona: its name and avatar; the mention of it is taken out of the prompt the agent gets."""

    NOTEBOOK_EDITING_GUIDANCE = ""
    """The base persona puts a note on editing notebooks with Jupyter's MCP tools before the first prompt;
    this agent edits files from its kernel and has no such tools, so it gets the person's words only."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, executable=acp_command(), **kwargs)

    @property
    def defaults(self) -> PersonaDefaults:
        return PersonaDefaults(
            name=NAME,
            description="A code-action agent: it runs Python in its own kernel, starts subagents for "
            "independent jobs, and asks you before each action, naming the agent.",
            avatar_path=str(Path(__file__).with_name("freeact-sub.svg")),
            system_prompt="unused",
        )

    async def process_message(self, message: Any) -> None:
        body = _MENTION.sub("", message.body).strip()
        await super().process_message(dataclasses.replace(message, body=body))
