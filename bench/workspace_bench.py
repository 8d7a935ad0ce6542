"""What a copy-on-write workspace costs, against the same work without one, alternated in one run.

    python bench/workspace_bench.py [--files 10000] [--runs 20]

Rows (ratios to the plain baseline measured in the same run, on a folder of `--files` files):
- spawn: a process confined by the sandbox's script with the view mounted, against the same plan without it
  (the mechanism an isolated child's kernel adds to its start: the mount, and the workspace's folders);
- round trip: a write-then-read of a small file 200 times inside the view, against in the plain folder
  (what a cell that touches files pays);
- change set: reading the change set of one changed file out of `--files` (the host's work when the child ends);
- store: bytes the workspace holds against the bytes the child changed.
Checkpoints per turn (rewind) have their own rows: `bench/rewind_bench.py`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from freeact_sub.sandbox import ENFORCE_SCRIPT
from freeact_sub.workspaces import Workspace, read_changes

ROUND_TRIP = ("import time; t = time.perf_counter()\n"
              "for i in range(200):\n    open('rt.txt', 'w').write('x' * 100); open('rt.txt').read()\n"
              "print(time.perf_counter() - t)")


def _run(folder: Path, scratch: Path, overlay: dict[str, str] | None, code: str) -> tuple[float, str]:
    plan = {"deny": [], "write": [str(folder)], "network": False, "scratch": str(scratch)}
    if overlay:
        plan["overlay"] = overlay
    started = time.perf_counter()
    done = subprocess.run([sys.executable, ENFORCE_SCRIPT, json.dumps(plan), "--", sys.executable, "-S", "-c", code],
                          cwd=folder, check=True, capture_output=True, text=True)
    return time.perf_counter() - started, done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as place:
        root = Path(place)
        folder = root / "work"
        for n in range(args.files):
            sub = folder / f"d{n // 100}"
            sub.mkdir(parents=True, exist_ok=True)
            (sub / f"f{n}.txt").write_text(f"{n}\n")
        spawn: dict[str, list[float]] = {"plain": [], "view": []}
        trip: dict[str, list[float]] = {"plain": [], "view": []}
        reads, store = [], []
        for run in range(args.runs):
            ws_dir = root / f"ws{run}"
            ws_dir.mkdir()
            for kind in (("plain", "view") if run % 2 else ("view", "plain")):  # alternated: the load hits both
                made = time.perf_counter()
                view = Workspace.create(ws_dir, folder).plan() if kind == "view" and not (ws_dir / "upper").exists() \
                    else (Workspace(folder=ws_dir, lower=folder).plan() if kind == "view" else None)
                setup = time.perf_counter() - made
                seconds, _ = _run(folder, root, view, "pass")
                spawn[kind].append(seconds + setup)
                code = ROUND_TRIP + "\nopen('d0/f0.txt', 'a').write('more\\n')" if view else \
                    ROUND_TRIP.replace("rt.txt", "rt-plain.txt")  # the plain run leaves the folder as it was
                _, inner = _run(folder, root, view, code)
                trip[kind].append(float(inner))
            started = time.perf_counter()
            changes = read_changes(ws_dir / "upper", folder)
            reads.append(time.perf_counter() - started)
            changed = sum(c.size for c in changes.changes)
            held = sum(p.stat().st_size for p in (ws_dir / "upper").rglob("*") if p.is_file())
            store.append(held / changed if changed else 1.0)
            (folder / "rt-plain.txt").unlink(missing_ok=True)
        med = statistics.median
        print(f"folder of {args.files} files, median of {args.runs} alternated runs")
        plain, view = med(spawn["plain"]), med(spawn["view"])
        print(f"spawn       plain {plain * 1e3:7.1f} ms  view {view * 1e3:7.1f} ms  "
              f"{(view - plain) * 1e3:+.1f} ms  ratio {view / plain:.3f}")
        print(f"round trip  plain {med(trip['plain']) * 1e3:7.1f} ms  view {med(trip['view']) * 1e3:7.1f} ms  "
              f"ratio {med(trip['view']) / med(trip['plain']):.3f}")
        print(f"change set  read in {med(reads) * 1e3:.1f} ms (the upper layer only, not the {args.files} files)")
        print(f"store       {med(store):.3f} x the bytes changed")


if __name__ == "__main__":
    main()
