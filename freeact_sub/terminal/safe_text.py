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
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["HIDDEN", "ansi_text", "clean", "message", "screen_lines", "visible"]

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
_WITH_SGR = re.compile(f"(?!{_SGR})(?:{_SEQUENCES}|[{HIDDEN}]+)")
"""What `clean(keep_sgr=True)` removes: all `_PROSE` does but an SGR sequence (no call back into Python per match:
half a megabyte of lone ESCs is half a million matches)."""
_SGR_ONLY = re.compile(_SGR)
_SGR_PARTS = re.compile(f"({_SGR})")
_SPACES = re.compile(" *")
_BLANK_LINE = re.compile("(?:^|\n) +(?:\n|$)")
"""A line of nothing but spaces (after `clean()` and `expandtabs`, the only blanks left)."""
_EMPTY_SHOWN = 8
"""Empty lines in a row shown as such; a longer run is one line saying how many (each line costs the gutter)."""
_RESET = "\x1b[0m"
_CARRIED = 16
"""At most this many of a line's last colour sequences start the screen lines it folds onto (a line made of
nothing but colour sequences must not cost the square of its length)."""
_REVEAL = re.compile(f"[{HIDDEN}{_QUIET}]")


def clean(text: str, *, keep_sgr: bool = False) -> str:
    """`text` with every control removed but newline and tab (and SGR colours with `keep_sgr`).

    A lone carriage return drops what came before it on its line: `"50%\\r100%"` is `"100%"`.
    """
    if keep_sgr and "\x1b" in text:  # (without an ESC there is no SGR to keep: the plain pattern is faster)
        text = _WITH_SGR.sub("", text)
    else:
        text = _PROSE.sub("", text)
    if "\r" in text:
        text = "\n".join(_last_written(line, keep_sgr) for line in text.replace("\r\n", "\n").split("\n"))
    return text


def screen_lines(lines: list[str], width: int, *, colours: bool) -> list[str]:
    """Lines of kernel output as the screen lines they take `width` columns wide, ready to write as they are.

    `clean()` first (SGR colours kept with `colours`, and a line with colours ends with a reset so none
    reaches the next); tabs expanded; a line wider than `width` loses its trailing blanks and is folded at
    `width` cells, at a space where one fits (wide and combining characters are taken as two cells); more than
    eight empty (or blank) lines in a row become one line that says how many. Linear in the text, and the
    common line (ASCII, no colour, not too wide) costs a few string operations: this is how a cell's output
    reaches the screen, however a kernel made it (half a million empty lines included).
    """
    text = clean("\n".join(lines), keep_sgr=colours).expandtabs(8)
    if colours and "\x1b" in text:
        text = _only_known_colours(text)
    split = text.split("\n")
    if text.isascii() and "" not in split and not _BLANK_LINE.search(text) and max(map(len, split)) <= width:
        # the common output, every line as it is (checked in C, not line by line: 100,000 one-character lines cost
        # as much as 200 kB of log lines, not four times as much)
        if colours and "\x1b" in text:
            return [line + _RESET if "\x1b" in line else line for line in split]
        return split
    shown: list[str] = []
    empty = 0  # empty lines in a row
    for line in split:
        if not line or line.isspace():
            empty += 1
            continue
        if empty:
            shown += _empty_lines(empty)
            empty = 0
        if line.isascii():
            coloured = "\x1b" in line
            if len(line) <= width:  # (its colour sequences take no cell: it fits all the more)
                shown.append(line + _RESET if coloured else line)
                continue
            if coloured and len(_SGR_ONLY.sub("", line)) <= width:
                shown.append(line + _RESET)
                continue
        shown.extend(_folded(line.rstrip(), width, colours))
    return shown + _empty_lines(empty)


_COLOUR_PARAMETERS = frozenset(
    {"0", "1", "2", "3", "4", "5", "7", "9", "21", "22", "23", "24", "25", "27", "29", "39", "49", "53", "55"}
    | {str(number) for number in (*range(30, 38), *range(40, 48), *range(90, 98), *range(100, 108))}
)
"""SGR parameters kept: attributes, their resets and the 16 colours. Not 8 (concealed: hidden text on the
screen), nor anything unknown; 38, 48 and 58 (256 and true colours) are read with their arguments."""
_kept_sequences: dict[str, str] = {}


def _only_known_colours(text: str) -> str:
    """`text` (cleaned, with SGR sequences) with each SGR sequence cut down to `_COLOUR_PARAMETERS`.

    A few distinct sequences (what a program prints) are replaced by `str.replace`; many distinct ones go through
    one substitution with a call per sequence, never one pass per sequence."""
    distinct = set(_SGR_ONLY.findall(text))
    changed = {sequence: kept for sequence in distinct if (kept := _kept_colours(sequence)) != sequence}
    if len(changed) > 32:
        return _SGR_ONLY.sub(lambda match: changed.get(match.group(), match.group()), text)
    for sequence, kept in changed.items():
        text = text.replace(sequence, kept)
    return text


def _kept_colours(sequence: str) -> str:
    """One SGR sequence with only the parameters of `_COLOUR_PARAMETERS` (and extended colours); empty if none.

    rich's `AnsiDecoder` reads them too, at some tens of microseconds a line; the few sequences a cell uses
    are remembered here instead."""
    if (kept := _kept_sequences.get(sequence)) is None:
        kept = _only_colours(sequence[2:-1].split(";"))
        if len(_kept_sequences) < 4096:
            _kept_sequences[sequence] = kept
    return kept


def _only_colours(parameters: list[str]) -> str:
    kept: list[str] = []
    index = 0
    while index < len(parameters):
        parameter = parameters[index]
        head, _, rest = parameter.partition(":")
        if rest:  # 38:5:n, 38:2::r:g:b, 4:3 (a curly underline): one parameter with its arguments
            if head in ("38", "48", "58") and all(len(part) <= 3 for part in rest.split(":")):
                kept.append(parameter)
            elif head == "4":
                kept.append("4")
            index += 1
            continue
        if parameter in ("38", "48", "58"):
            mode = parameters[index + 1] if index + 1 < len(parameters) else ""
            group = parameters[index : index + (3 if mode == "5" else 5 if mode == "2" else 1)]
            if len(group) in (3, 5) and all(0 < len(part) <= 3 for part in group):
                kept += group
            index += max(len(group), 1)
            continue
        if parameter == "" or parameter.lstrip("0") in _COLOUR_PARAMETERS or parameter.strip("0") == "":
            kept.append(parameter.lstrip("0") or "0")
        index += 1
    return f"\x1b[{';'.join(kept)}m" if kept else ""


def _empty_lines(count: int) -> list[str]:
    """`count` empty lines in a row: up to `_EMPTY_SHOWN` of them, and more as one line that says how many."""
    if count <= _EMPTY_SHOWN:
        return [""] * count
    return ["", f"[{count - 2:,} more empty lines]", ""]


def _folded(text: str, width: int, colours: bool) -> list[str]:
    """One cleaned line, folded at `width` cells; the last few colour sequences carried onto each screen line."""
    if not (colours and "\x1b" in text):
        return _wrapped(text, width)
    parts = _SGR_PARTS.split(text) if colours and "\x1b" in text else [text]
    end = _RESET if len(parts) > 1 else ""
    lines: list[str] = []
    current: list[str] = []  # the screen line being filled: text and colour sequences
    used = 0  # its cells
    shown = False  # whether it holds any text yet
    active: deque[str] = deque(maxlen=_CARRIED)  # the colour sequences since the line's last reset (the last few)
    for index, part in enumerate(parts):
        if index % 2:
            current.append(part)
            if part in (_RESET, "\x1b[m"):
                active.clear()
            else:
                active.append(part)
            continue
        if not part:
            continue
        if len(part) <= width - used and part.isascii():  # it fits: the common case of a coloured line
            current.append(part)
            used += len(part)
            shown = True
            if used >= width:
                lines.append("".join(current) + end)
                current, used, shown = list(active), 0, False
            continue
        cells = _cells_per_character(part)
        room = (width - used) // cells
        pieces = [part[:room]] if room else []
        step = max(width // cells, 1)
        pieces += [part[start : start + step] for start in range(room, len(part), step)]
        for number, piece in enumerate(pieces):
            if number or not room:
                lines.append("".join(current) + end)
                current, used = list(active), 0
            current.append(piece)
            shown = True
        used += cells * len(pieces[-1])
        if used >= width:
            lines.append("".join(current) + end)
            current, used, shown = list(active), 0, False
    if shown or not lines:
        lines.append("".join(current) + end)
    return lines


def _wrapped(text: str, width: int) -> list[str]:
    """A line without colours, folded at `width` cells: at the last space that fits where there is one (the spaces
    at a break are dropped, as a word-wrapping terminal does), else at `width`. Each character is looked at a
    bounded number of times, by `str` methods."""
    step = max(width // _cells_per_character(text), 1)
    lines: list[str] = []
    start, size = 0, len(text)
    while start < size:
        end = start + step
        if end < size and text[end] != " ":
            space = text.rfind(" ", start + 1, end)
            end = space if space > start else end
        lines.append(text[start:end])
        spaces = _SPACES.match(text, end)
        start = spaces.end() if spaces else end
    return lines or [""]


def _cells_per_character(text: str) -> int:
    """1 if every character of `text` takes one cell, else 2 (what no character exceeds).

    Exact where it counts (ASCII and the Latin letters below U+0300, the soft hyphen aside); text with wide or
    combining characters folds as if each took two cells, which is exact for CJK and never runs past the
    line. Measuring each character (rich's `cell_len`) would cost a Python call per character."""
    return 1 if text.isascii() or (max(text) < "\u0300" and "\u00ad" not in text) else 2


def _last_written(line: str, keep_sgr: bool) -> str:
    """What a line ends up showing: its last part after a carriage return that shows anything."""
    parts = line.split("\r")
    coloured = keep_sgr and "\x1b" in line
    shown = [part for part in parts if (_SGR_ONLY.sub("", part) if coloured else part)]
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
