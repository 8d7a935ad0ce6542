"""What the host's import guard costs: an agent's start and stop, and each import the host makes.

    python bench/import_guard_bench.py [--modules 300] [--rounds 5]

- window: opening and closing a window (what `Agent.start()` and `stop()` add: one small JSON file, locked),
  CPU milliseconds per pair;
- imports: `--modules` small modules imported from a folder an agent's window covers (each file is checked, the
  source read once and compiled, its `.pyc` left aside when written in the window) and from a folder no window
  covers, with the guard in `sys.meta_path` and without it, alternated round by round in this one process; CPU
  microseconds per import and the ratio to the unguarded import of the same files.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

from freeact_sub.sandbox import BUILT_IN_PROFILES, import_guard
from freeact_sub.sandbox.import_guard import watch_agent


def _modules(folder: Path, prefix: str, count: int) -> list[str]:
    names = [f"{prefix}_{index}" for index in range(count)]
    for name in names:
        (folder / f"{name}.py").write_text(f"VALUE = {len(name)}\ndef f(x):\n    return x + VALUE\n")
    return names


def _import_all(names: list[str]) -> float:
    for name in names:
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    start = time.process_time()
    for name in names:
        importlib.import_module(name)
    return (time.process_time() - start) / len(names) * 1e6


def _set_guard(on: bool) -> None:
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, import_guard._Guard)]
    if on:
        import_guard.install()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modules", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        watched, plain = Path(root, "watched"), Path(root, "plain")
        watched.mkdir()
        plain.mkdir()
        watched_names = _modules(watched, "w", args.modules)
        plain_names = _modules(plain, "p", args.modules)
        time.sleep(2.1)  # the files are the person's, older than any window
        pairs = []
        for _ in range(20):
            start = time.process_time()
            watch_agent(watched, BUILT_IN_PROFILES["workspace"])()
            pairs.append((time.process_time() - start) * 1e3)
        close = watch_agent(watched, BUILT_IN_PROFILES["workspace"])  # an agent runs during the imports
        sys.path[:0] = [str(watched), str(plain)]
        times: dict[str, list[float]] = {
            "watched, guard": [],
            "plain, guard": [],
            "watched, no guard": [],
            "plain, no guard": [],
        }
        for _ in range(args.rounds):
            for on in (True, False):
                _set_guard(on)
                suffix = "guard" if on else "no guard"
                times[f"watched, {suffix}"].append(_import_all(watched_names))
                times[f"plain, {suffix}"].append(_import_all(plain_names))
        close()
        print(f"window open + close: {statistics.median(pairs):.2f} ms CPU (median of {len(pairs)})")
        medians = {what: statistics.median(values) for what, values in times.items()}
        for what, value in medians.items():
            print(f"import, {what}: {value:.0f} us CPU per module (median of {args.rounds} rounds)")
        for folder in ("watched", "plain"):
            ratio = medians[f"{folder}, guard"] / medians[f"{folder}, no guard"]
            print(f"ratio {folder}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
