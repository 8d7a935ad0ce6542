"""Light or dark: which background the terminal has, and the colours that read on it.

The code a person approves is highlighted with a Pygments style, and each agent has a label
colour. `monokai` draws identifiers in near-white and the bright label colours are faint on a
light background, so the CLI picks per background, in this order:

1. `--theme light|dark`, then `FREEACT_SUB_THEME`;
2. `COLORFGBG` (`15;0`: light text on black), which many terminals set;
3. an OSC 11 query ("what is your background colour?") answered within `QUERY_TIMEOUT`, asked
   only when stdin and stdout are the same terminal;
4. else dark.
"""

from __future__ import annotations

import os
import re
import select
import termios
import time
import tty
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Background", "Theme", "choose_background", "from_colorfgbg", "parse_background_reply",
           "query_background", "theme_for"]

Background = Literal["light", "dark"]
QUERY_TIMEOUT = 0.2
"""Seconds to wait for the terminal's answer to the OSC 11 query (a terminal that does not know it is silent)."""

_DARK_COLOURS = ("bright_cyan", "bright_magenta", "bright_green", "bright_yellow", "bright_blue", "orange1", "orchid",
                 "spring_green2", "deep_sky_blue1", "light_salmon1")
_LIGHT_COLOURS = ("dodger_blue3", "magenta3", "green4", "dark_orange3", "purple", "dark_cyan", "red3", "blue_violet",
                  "chartreuse4", "deep_pink3")
_LIGHT_NAMES = {"yellow": "dark_goldenrod", "bright_yellow": "dark_goldenrod", "cyan": "dark_cyan",
                "bright_cyan": "dark_cyan", "green": "green4", "bright_green": "green4", "white": "grey35",
                "bright_white": "grey35", "orange": "dark_orange3", "pink": "deep_pink3", "purple": "purple"}
"""Type colours (`color: yellow`) that would be faint on a light background, and what is drawn instead."""
_APPLIED: weakref.WeakKeyDictionary[Any, Theme] = weakref.WeakKeyDictionary()
"""The theme each console was given (`Theme.apply`): the CLI and its session both apply it, it is pushed once."""
_LIGHT_WARNING = "dark_orange3"
"""Warnings on a light background (ANSI yellow is faint on white)."""


@dataclass(frozen=True, kw_only=True)
class Theme:
    """The colours for one background."""

    background: Background
    code_theme: str
    """The Pygments style code to approve is highlighted with."""
    agent_colours: tuple[str, ...]
    """Agent label colours, handed out in order."""

    @property
    def prompt_style(self) -> str:
        """The input line's `you ›`, in prompt_toolkit's words (bright cyan is faint on white)."""
        return "bold ansiblue" if self.background == "light" else "bold ansibrightcyan"

    @property
    def styles(self) -> dict[str, str]:
        """Rich's own styles that do not read on this background, drawn otherwise: Markdown's inline code is cyan
        on a black box, a dark patch in every answer on a light terminal."""
        if self.background == "light":
            # every warning line (`cancelled`, `rejected`, the demo note) says `yellow`: on white it is unreadable,
            # so the name itself is drawn in a dark orange (rich looks a style's name up in the theme first)
            return {"markdown.code": "bold dark_blue on grey93", "markdown.code_block": "dark_blue on grey93",
                    **{name: _LIGHT_WARNING for name in ("yellow", "bright_yellow")},
                    **{f"bold {name}": f"bold {_LIGHT_WARNING}" for name in ("yellow", "bright_yellow")}}
        return {}

    def apply(self, console: Any) -> None:
        """Draw `console`'s output in this theme's styles (once per console; nothing to do for a dark one)."""
        if self.styles and _APPLIED.get(console) is not self:
            from rich.theme import Theme as RichTheme

            console.push_theme(RichTheme(self.styles))
            _APPLIED[console] = self

    def type_colour(self, name: str) -> str:
        """An agent type's own colour (a rich colour name) as drawn on this background."""
        return _LIGHT_NAMES.get(name, name) if self.background == "light" else name


def theme_for(background: Background) -> Theme:
    """The theme for a light or a dark background."""
    if background == "light":
        return Theme(background="light", code_theme="default", agent_colours=_LIGHT_COLOURS)
    return Theme(background="dark", code_theme="monokai", agent_colours=_DARK_COLOURS)


def from_colorfgbg(value: str | None) -> Background | None:
    """The background `COLORFGBG` says (`fg;bg` or `fg;default;bg`: colour 7 and 9–15 light, 0–6 and 8 dark)."""
    if not value:
        return None
    last = value.split(";")[-1].strip()
    if not last.isdigit():
        return None
    number = int(last)
    return "light" if number == 7 or 9 <= number <= 15 else "dark"


_REPLY = re.compile(rb"\x1b\]11;rgba?:([0-9a-fA-F]{1,4})/([0-9a-fA-F]{1,4})/([0-9a-fA-F]{1,4})")


def parse_background_reply(data: bytes) -> Background | None:
    """The background an OSC 11 reply (`ESC ] 11 ; rgb:ffff/ffff/ffff BEL`) names, by its luminance."""
    found = _REPLY.search(data)
    if found is None:
        return None
    red, green, blue = (int(part, 16) / (16 ** len(part) - 1) for part in found.groups())
    return "light" if 0.2126 * red + 0.7152 * green + 0.0722 * blue > 0.5 else "dark"


def query_background(fd: int, out: int, timeout: float = QUERY_TIMEOUT) -> Background | None:
    """Ask the terminal (keys on `fd`, the screen on `out`) for its background colour; None if it does not answer
    in time."""
    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        return None
    reply = b""
    try:
        tty.setraw(fd, termios.TCSANOW)  # the answer must not be echoed, nor wait for Enter
        os.write(out, b"\x1b]11;?\x1b\\")
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                break
            reply += os.read(fd, 256)
            if reply.endswith((b"\x07", b"\x1b\\")):
                break
    except OSError:
        return None
    finally:
        termios.tcsetattr(fd, termios.TCSAFLUSH, saved)
    return parse_background_reply(reply)


def choose_background(
    flag: str | None, environ: Mapping[str, str], *, tty_fds: tuple[int, int] | None = None
) -> Background:
    """The background to draw for: the flag, `FREEACT_SUB_THEME`, `COLORFGBG`, the terminal's answer, else dark.

    A value other than `light` or `dark` is a `ValueError` naming where it came from."""
    for where, value in (("--theme", flag), ("FREEACT_SUB_THEME", environ.get("FREEACT_SUB_THEME"))):
        if value:
            if value not in ("light", "dark"):
                raise ValueError(f"{where} {value}: use light or dark")
            return value  # type: ignore[return-value]
    said = from_colorfgbg(environ.get("COLORFGBG"))
    if said is not None:
        return said
    if tty_fds is not None:
        answered = query_background(*tty_fds)
        if answered is not None:
            return answered
    return "dark"
