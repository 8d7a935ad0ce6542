"""The `freeact-sub` command line: its flags, and the checks of what they name before anything starts."""

from __future__ import annotations

import argparse
import os
import textwrap
from pathlib import Path

from freeact_sub.launch import UsageError, add_config_flags, add_demo_flag, working_dir_from

__all__ = ["UsageError", "build_parser", "check_prompt_text", "check_timeline_file", "working_dir_from"]


def build_parser() -> argparse.ArgumentParser:
    from freeact_sub import __version__

    parser = argparse.ArgumentParser(
        prog="freeact-sub",
        description=textwrap.fill(
            "A code-action agent in your terminal: it writes Python that runs in an IPython kernel, "
            "starts subagents for independent jobs, and asks you before each action, naming the agent.", 78
        ),
        epilog=(
            "commands:\n"
            "  freeact-sub sessions   list and show saved sessions (resume one: --resume ID)\n"
            "  freeact-sub trust      list the folders you trust, or forget one\n"
            "  freeact-sub acp        the Agent Client Protocol agent (editors, Jupyter chat)\n"
            "  (each takes --help)\n"
            "\n"
            + textwrap.fill(
                "Enter sends, Alt-Enter or Ctrl-J starts a new line; Ctrl-C cancels a running turn, and at an "
                "empty prompt Ctrl-C or Ctrl-D exits. Try it without an API key: freeact-sub --demo", 78
            )
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the list of commands keeps its lines
    )
    parser.add_argument("-p", "--prompt", help="one-shot mode: run this prompt, print the final answer, exit")
    parser.add_argument(
        "--timeline",
        metavar="FILE",
        help="with -p: draw who did what when into FILE (.svg, .png or .html) when the run ends",
    )
    add_config_flags(parser)
    parser.add_argument(
        "--theme",
        choices=("light", "dark"),
        help="colours for a light or a dark terminal background (default: asked of the terminal; also "
        "FREEACT_SUB_THEME)",
    )
    add_demo_flag(parser)
    parser.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        metavar="ID",
        help="continue a saved session (default: the one used last); list them with: freeact-sub sessions",
    )
    parser.add_argument("--version", action="version", version=f"freeact-sub {__version__}")
    return parser


def check_prompt_text(prompt: str) -> None:
    """`-p` text that is not valid UTF-8 is refused before anything starts (no kernel, no session)."""
    from .input_text import first_undecodable

    where = first_undecodable(prompt)
    if where is not None:
        raise UsageError(f"-p: the prompt is not valid UTF-8 (a byte at character {where + 1} is not); "
                         "pass the text as UTF-8 (iconv -t UTF-8)")


def check_timeline_file(name: str, one_shot: bool) -> None:
    """`--timeline FILE` goes with `-p` and names a file the timeline can be drawn as."""
    if not one_shot:
        raise UsageError(
            "--timeline goes with -p PROMPT; for a saved session: freeact-sub sessions show ID --timeline FILE"
        )
    path = Path(name).expanduser()
    if path.suffix.lower() not in (".svg", ".png", ".html", ".htm"):
        raise UsageError(f"--timeline {name}: name a .svg, .png or .html file")
    folder = path.parent
    if path.is_dir():
        raise UsageError(f"--timeline {name}: that is a folder; name a file in it")
    if not folder.is_dir():
        raise UsageError(f"--timeline {name}: the folder {folder} does not exist (checked before the run)")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"--timeline {name}: {path if path.exists() else folder} is not writable")
