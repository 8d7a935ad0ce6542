"""What a front end that cannot ask says when the working folder waits for trust: the files, and the one line
(`freeact-sub trust add DIR`) that trusts the folder from any terminal. The ACP agent says it in the chat when its
trust question could not be asked (`freeact_sub/acp/trust.py`)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from freeact_sub.config.type_files import project_agent_types

__all__ = ["trust_advice"]


def trust_advice(folder: str | Path, environ: dict[str, str] | None = None) -> str | None:
    """What the chat says when `folder` has files with powers that wait for trust, or None when none wait (or
    `FREEACT_SUB_ACP_ARGS` decides with `--trust-project` / `--no-trust-project`)."""
    args = shlex.split((environ if environ is not None else os.environ).get("FREEACT_SUB_ACP_ARGS", ""))
    if "--trust-project" in args or "--no-trust-project" in args:
        return None
    project = project_agent_types(Path(folder))
    if not project.powerful or project.trusted:
        return None
    script = Path(sys.executable).with_name("freeact-sub")
    command = shlex.join([str(script) if script.exists() else "freeact-sub", "trust", "add", str(project.folder)])
    head, *files = project.question().splitlines()
    return "\n".join(
        [
            f"**This folder waits for your trust.** {head}",
            "",
            *(f"- `{line.strip()}`" for line in files),
            "",
            "To trust it (remembered until these files change), run this in a JupyterLab terminal, then write"
            " to me again:",
            "",
            "```bash",
            command,
            "```",
            "",
            "To run without these files, start JupyterLab with `FREEACT_SUB_ACP_ARGS=--no-trust-project`.",
        ]
    )
