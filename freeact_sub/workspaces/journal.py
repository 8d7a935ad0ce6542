"""The folder's versions that applying change sets replaced: the base a later change set is merged against.

Ten children that start together all see the same version of a file. When the first one's change is applied,
the journal keeps the version it replaced; the second one's change is then merged three ways (that version,
the folder's now, the child's) instead of being taken for a conflict with an unknown base.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

__all__ = ["Journal"]

KEPT_BYTES = 64 << 20
"""The most bytes of replaced versions kept in memory; the oldest go first (their merges become conflicts)."""


@dataclass
class _Entry:
    replaced_ns: int
    """When the version was replaced."""
    changed_ns: int
    """When that version itself was last changed (its ctime): it was the base of every child started after."""
    data: bytes


@dataclass
class Journal:
    """Replaced versions by path, for one working folder (a tree's children share it)."""

    applying: threading.Lock = field(default_factory=threading.Lock)
    """Held while a change set is applied: two sets applied at once would each take the folder for unchanged."""
    _entries: dict[str, list[_Entry]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _bytes: int = 0

    def keep(self, path: str, data: bytes, *, changed_ns: int, replaced_ns: int) -> None:
        """Keep `data`, the version of `path` last changed at `changed_ns`, replaced at `replaced_ns`."""
        with self._lock:
            self._entries.setdefault(path, []).append(_Entry(replaced_ns, changed_ns, data))
            self._bytes += len(data)
            while self._bytes > KEPT_BYTES and self._entries:
                oldest = min(self._entries, key=lambda p: self._entries[p][0].replaced_ns)
                self._bytes -= len(self._entries[oldest].pop(0).data)
                if not self._entries[oldest]:
                    del self._entries[oldest]

    def base(self, path: str, started_ns: int) -> bytes | None:
        """The version of `path` a child started at `started_ns` saw, if an apply since then replaced it."""
        with self._lock:
            for entry in self._entries.get(path, []):
                if entry.replaced_ns >= started_ns:
                    return entry.data if entry.changed_ns <= started_ns else None
        return None
