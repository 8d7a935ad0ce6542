"""The garbage collector while the `freeact-sub` command starts: seldom, then frozen.

Starting imports pydantic-ai, a provider's SDK and `mcp`, which build thousands of pydantic models and hundreds of
thousands of objects, and almost none of them become garbage. The cyclic collector, at its default thresholds,
walks them again and again as they pile up: a fifth of the command's start-up CPU (`py-spy record --native` of a
`--demo -p` one-shot: `gc_collect_main` in 20 % of the host's samples). So the command collects seldom while it
starts, and once the agent is up, moves what exists to the collector's permanent generation (`gc.freeze()`: never
walked again) and collects at the usual pace from then on.
"""

from __future__ import annotations

import gc

__all__ = ["started", "starting"]

_STARTING_THRESHOLDS = (100_000, 50, 1_000)
_usual: tuple[int, int, int] | None = None


def starting() -> None:
    """Collect seldom from now on (the command's start)."""
    global _usual
    if _usual is None:
        _usual = gc.get_threshold()
    gc.set_threshold(*_STARTING_THRESHOLDS)


def started() -> None:
    """The start is over: freeze what exists and collect at the usual pace again (does nothing a second time)."""
    global _usual
    if _usual is None:
        return
    gc.freeze()
    gc.set_threshold(*_usual)
    _usual = None
