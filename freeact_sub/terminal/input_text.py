"""A person's text that is not valid Unicode: bytes that were not UTF-8, read by Python as lone surrogates.

Python reads a command-line argument (and a terminal line in a non-UTF-8 locale) that is not UTF-8
with `surrogateescape`: each bad byte becomes a lone surrogate (`\\udcff`), which no file, JSON body
or model request can carry ("surrogates not allowed"). The CLI refuses such a `-p` prompt before
anything starts and replaces such bytes in a typed prompt with U+FFFD, saying so in one line.
"""

from __future__ import annotations

import re

__all__ = ["first_undecodable", "replace_undecodable"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def first_undecodable(text: str) -> int | None:
    """The index of the first character of `text` that is a lone surrogate (a byte that was not UTF-8), or None."""
    found = _SURROGATE.search(text)
    return found.start() if found else None


def replace_undecodable(text: str) -> str:
    """`text` with each byte that was not UTF-8 (and any other lone surrogate) replaced by U+FFFD."""
    if first_undecodable(text) is None:
        return text
    try:  # bytes Python escaped are decoded again, so a valid sequence split across escapes is kept
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        return _SURROGATE.sub("\ufffd", text)
