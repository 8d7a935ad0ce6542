"""Whether the terminal uses the project's agent types that carry powers: the flag, the remembered trust, or a question.

Asked once per folder (and again when those files change), before any kernel starts: `y`
trusts the folder and remembers it with a hash of the files; any other answer (`n`, Enter,
Esc) runs without them. Without a terminal to ask, `--trust-project` or `--no-trust-project`
must say it.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from freeact_sub import Agent, ProjectPowers

__all__ = ["TrustRefused", "settle_trust"]


class TrustRefused(Exception):
    """The folder's powerful files wait for a decision nobody can give here (no terminal, no flag)."""


async def settle_trust(
    agent: Agent, flag: bool | None, console: Any, *, before_asking: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Set `agent.trust_project` from `flag` (`--[no-]trust-project`), the remembered trust, or the person's answer.

    `before_asking` runs before the question, if one is asked (it takes a prompt that is up down).

    Raises `TrustRefused` (one line) when the folder waits for trust and stdin is no terminal;
    a `ConfigError` from a bad type file or trust file goes through.
    """
    project = agent.untrusted_project()
    if flag is not None:
        agent.trust_project = flag
        if not flag and project is not None:
            _say_inert(project, console)
        return
    if project is None:
        return
    if not sys.stdin.isatty():
        files = "; ".join(project.lines())
        raise TrustRefused(
            f"this folder ships agent types that can run commands or send your keys elsewhere, or instructions and "
            f"skills for every agent's prompt ({files}), and it is not trusted; without a terminal to ask, add "
            "--trust-project to use them or --no-trust-project to run without them"
        )
    if before_asking is not None:
        await before_asking()
    if await ask(project, console):
        from freeact_sub import ConfigError

        try:
            where = project.remember()
        except (OSError, ConfigError) as exc:
            console.print(f"Trusted for this run only (could not remember it: {exc}).", style="yellow")
            agent.trust_project = True
            return
        console.print(f"Trusted. Remembered in {where}; you are asked again when these files change.",
                      style="green")
        return  # trust_project stays None: `start()` uses the files only if they are still the ones trusted
    agent.trust_project = False
    _say_inert(project, console)


async def ask(project: ProjectPowers, console: Any) -> bool:
    """Show the files and fields, and wait for one key: `y` is yes, anything else no."""
    from rich.text import Text

    from .keys import ESCAPE, KeyReader

    console.print(Text(project.question(), style="yellow"))
    console.print(Text("Trust this folder? Its agent types then act with your rights, its instructions and skills "
                       "steer every agent. [y/N] ", style="bold"), end="")
    with KeyReader() as keys:
        keys.discard_typed_ahead()
        while True:
            key = await keys.get()
            if key in ("y", "Y"):
                console.print("y")
                return True
            if key in ("n", "N", "\r", "\n", ESCAPE, ""):
                console.print("n")
                return False


def _say_inert(project: ProjectPowers, console: Any) -> None:
    names = project.names()
    console.print(f"Not trusted: {names} not used this run (the other agent types work).", style="yellow")
