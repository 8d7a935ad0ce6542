"""What the `freeact-sub` command prints outside the live view: the final answer, a resumed session's last
turn, a one-line complaint on stderr; and Ctrl-C held off while kernels and MCP servers stop."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .theme import Theme

__all__ = ["complain", "print_answer", "show_resumed", "sigint_ignored"]


def complain(text: str) -> None:
    """`freeact-sub: TEXT` on stderr; the text may quote what we did not write (see `safe_text.message`)."""
    from .safe_text import message

    print(wrapped("freeact-sub: " + message(text), sys.stderr), file=sys.stderr)


def wrapped(text: str, stream: Any) -> str:
    """`text` broken between words to the width of the terminal `stream` is, its further lines indented two cells
    (the terminal's own wrap cut `permis|sionMode` and went on at column 0); unchanged when it is no terminal."""
    import shutil
    import textwrap

    if not stream.isatty():
        return text
    width = shutil.get_terminal_size().columns
    lines = []
    for line in text.split("\n"):
        lines.append(textwrap.fill(line, width=max(width - 1, 20), subsequent_indent="  ", break_long_words=False,
                                   break_on_hyphens=False) if len(line) >= width else line)
    return "\n".join(lines)


def show_resumed(console: Any, session_id: str, working_dir: Path, agent_id: str) -> None:
    """The last turn of a resumed session, printed as it was shown live, and what resuming means."""
    from rich.text import Text

    from freeact_sub.sessions import open_session

    from .sessions_cmd import print_transcript

    print_transcript(console, open_session(session_id, working_dir), agent_id, last_turns=1)
    console.print()
    console.print(Text(f"Resumed session {session_id}. The conversation goes on; the kernel is new "
                       "(earlier variables are gone, files remain).", style="yellow"))


def print_answer(answer: str, theme: Theme | None = None) -> None:
    """The final answer on stdout: Markdown in a terminal, else plain text; terminal controls removed either way
    (piped into a file, it still reaches a screen when someone reads the file)."""
    from .safe_text import clean

    answer = clean(answer)
    if sys.stdout.isatty():
        from rich.markdown import Markdown
        from rich.theme import Theme as RichTheme

        from .screen import ScreenConsole

        console = ScreenConsole(theme=RichTheme(theme.styles) if theme is not None else None)
        console.print(Markdown(answer, hyperlinks=False, code_theme=theme.code_theme if theme else "monokai"))
    else:
        sys.stdout.write(answer.rstrip("\n") + "\n")
        sys.stdout.flush()


@contextlib.contextmanager
def sigint_ignored() -> Iterator[None]:
    """Ctrl-C while kernels and MCP servers stop must not cut the cleanup short."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
