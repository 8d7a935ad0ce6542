"""Text nobody on our side wrote, made safe for a person's terminal.

Model text, kernel output, tool results, names and descriptions the model or a file chose, error
messages and saved transcripts may carry control characters that a terminal obeys: `ESC c` resets
it, OSC 52 writes the clipboard, OSC 0 sets the window title, a CSI moves the cursor over lines the
CLI printed, the 8-bit forms (`\\x9b` for CSI) do the same in one character, and Unicode bidi
overrides make a line read in another order than it is. Two ways to show such text:

- `clean()` for text a person reads (answers, output, results): every control is removed. Only
  newline and tab stay, and, with `keep_sgr=True` (kernel output, which `ansi_text()` turns into
  rich styles), SGR colour sequences `ESC [ digits ; : m`. A carriage return does not move the
  cursor: `\\r\\n` is a newline, and a lone `\\r` starts its line again, so what was written before it
  on that line is dropped, as a terminal would overwrite it (a progress bar shows its last state).
- `visible()` for text a person approves (code, tool arguments, a subagent's prompt): nothing is
  removed, so what runs is what was shown; controls and invisible characters are drawn as
  `␛`, `␇`, `⟨U+202E⟩`. A lone `\\r` is shown as the line break Python reads it as.

Zero-width characters: the ones with no use in a terminal that can hide text from a reader or
from a copy (zero-width space, word joiner and invisible operators, the byte-order mark,
interlinear annotations, tag characters) are removed by `clean()`; the zero-width joiner and
non-joiner (emoji sequences, Indic and Persian script), the directional marks (right-to-left text)
and the soft hyphen are kept, as they change no line's order. `visible()` shows all of them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["HIDDEN", "ansi_text", "clean", "message", "visible"]

_ST = r"(?:\x07|\x1b\\|\x9c)"
"""What ends an escape string: BEL (xterm's OSC), ST in its 7-bit and 8-bit forms."""

_SGR = r"\x1b\[[0-9;:]*m"
_SEQUENCES = (
    # OSC, DCS, SOS, PM, APC (7- and 8-bit): to their terminator, or to the end of the line if it never comes
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*" + _ST + "?"
    # CSI (7- and 8-bit): parameters, intermediates, final byte (a cut-off one is dropped as far as it goes)
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    # every other escape sequence: ESC c (reset), ESC 7/8, ESC ( B, ESC # 8, … and a lone ESC
    r"|\x1b[ -/]*[0-~]?"
)
HIDDEN = (
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"  # C0 but tab, newline and carriage return; DEL; C1
    "\u202a-\u202e\u2066-\u2069"  # bidi embeddings, overrides and isolates
    "\u200b\u2060-\u2064\ufeff"  # zero-width space, word joiner, invisible operators, byte-order mark
    "\u2028\u2029\ufff9-\ufffb"  # line and paragraph separators (only \n breaks a line here), annotations
    "\U000e0000-\U000e007f"  # tag characters (invisible ASCII)
)
"""The characters `clean()` removes (a regex character class body); `\\r` is handled on its own."""
_QUIET = "\u00ad\u061c\u200c-\u200f"
"""Invisible characters `clean()` keeps (they change no line's order) but `visible()` shows."""

_PROSE = re.compile(f"{_SEQUENCES}|[{HIDDEN}]+")
_WITH_SGR = re.compile(f"({_SGR})|{_SEQUENCES}|[{HIDDEN}]+")
_SGR_ONLY = re.compile(_SGR)
_REVEAL = re.compile(f"[{HIDDEN}{_QUIET}]")


def clean(text: str, *, keep_sgr: bool = False) -> str:
    """`text` with every control removed but newline and tab (and SGR colours with `keep_sgr`).

    A lone carriage return drops what came before it on its line: `"50%\\r100%"` is `"100%"`.
    """
    if keep_sgr:
        text = _WITH_SGR.sub(lambda match: match.group(1) or "", text)
    else:
        text = _PROSE.sub("", text)
    if "\r" in text:
        text = "\n".join(_last_written(line, keep_sgr) for line in text.replace("\r\n", "\n").split("\n"))
    return text


def _last_written(line: str, keep_sgr: bool) -> str:
    """What a line ends up showing: its last part after a carriage return that shows anything."""
    parts = line.split("\r")
    shown = [part for part in parts if (_SGR_ONLY.sub("", part) if keep_sgr else part)]
    return shown[-1] if shown else ""


def ansi_text(line: str) -> Text:
    """Kernel output as rich text: its SGR colours become styles (rich writes its own, scoped to this
    text), every other control is removed by `clean()`."""
    from rich.text import Text

    return Text.from_ansi(clean(line, keep_sgr=True))


def message(text: str) -> str:
    """`text` for a plain message line (`freeact-sub: …` on stderr): `clean()`, its further lines behind a bar."""
    return clean(text).replace("\n", "\n  │ ")


def visible(text: str) -> str:
    """`text` with every control and invisible character drawn, nothing removed: `␛[2J`, `⟨U+202E⟩`.

    For what a person approves. `\\r\\n` and a lone `\\r` are line breaks (Python reads code so).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _REVEAL.sub(lambda match: _picture(match.group()), text)


def _picture(char: str) -> str:
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ … ␟ (␛ for ESC)
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"⟨U+{code:04X}⟩"
