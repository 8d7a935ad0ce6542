"""What checkpoints before each turn cost (rewind), on a folder of `--files` files, alternated in one run.

    python bench/rewind_bench.py [--files 10000] [--runs 20]

Rows:
- unchanged turn: the CPU and wall time of `Checkpoints.take` after a turn that changed nothing, with inotify
  (the default on Linux) and without (every folder looked at), against the baseline of `os.stat` on one file
  (what any checkpoint costs at the least), alternated;
- changed turn: `take` after a subprocess changed 10 files and added 2 (the folders they are in are looked at);
- first checkpoint: the copy of every file (once per session);
- store: bytes the store (packs, index and journal: the sum of their files' sizes, not disk blocks) grew by for a
  changed turn, against the bytes the turn changed (the changed files' new sizes): for 12 small files (10 of text
  that compresses, 2 random), for 12 random files of 1,300 bytes (they do not compress: what each path costs the
  index and journal shows), and for one file of 1 MiB;
- rewind: `restore` of those 12 paths.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from freeact_sub.workspaces.checkpoints import Checkpoints


def _timed(work: Callable[[], object]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


def _bytes_in(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


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
            (sub / f"f{n}.txt").write_text(f"{n}\n" * 20)
        watched = Checkpoints(root / "store-watched", folder)
        scanned = Checkpoints(root / "store-scanned", folder, watch=False)
        first = [_timed(lambda store=store: store.take(label="first")) for store in (watched, scanned)]
        unchanged: dict[str, list[tuple[float, float]]] = {"stat": [], "inotify": [], "scan": []}
        changed, growth, rewinds, large, noise = [], [], [], [], []
        for run in range(args.runs):
            unchanged["stat"].append(_timed(lambda: os.stat(folder / "d0" / "f0.txt")))
            unchanged["inotify"].append(_timed(lambda: watched.take(label="unchanged")))
            if run % 4 == 0:  # a full look is slow: fewer of them, still alternated
                unchanged["scan"].append(_timed(lambda: scanned.take(label="unchanged")))
            script = (
                f"import os\nfor i in range(10):\n    open(os.path.join({str(folder)!r}, f'd{{i}}', f'f{{i*100}}.txt'),"
                f" 'a').write('run {run}\\n' * 50)\n"
                f"open(os.path.join({str(folder)!r}, 'd3', 'new{run}a.bin'), 'wb').write(os.urandom(4096))\n"
                f"open(os.path.join({str(folder)!r}, 'd4', 'new{run}b.bin'), 'wb').write(os.urandom(8192))\n"
            )
            subprocess.run([sys.executable, "-S", "-c", script], check=True)
            point = watched.checkpoints()[-1].number
            before = _bytes_in(watched.store)
            changed.append(_timed(lambda: watched.take(label="changed")))
            sizes = sum((folder / f"d{i}" / f"f{i * 100}.txt").stat().st_size for i in range(10)) + 4096 + 8192
            growth.append((_bytes_in(watched.store) - before) / sizes)  # the journal's line included
            rewinds.append(_timed(lambda point=point: watched.restore(point)))
            watched.take(label="after the rewind")  # what the rewind wrote is the folder's state now
            before = _bytes_in(watched.store)
            (folder / "d5" / f"big{run}.bin").write_bytes(os.urandom(1 << 20))
            watched.take(label="one large file")
            large.append((_bytes_in(watched.store) - before) / (1 << 20))
            before = _bytes_in(watched.store)
            for n in range(12):
                (folder / "d6" / f"noise{n}.bin").write_bytes(os.urandom(1300))
            watched.take(label="twelve small random files")
            noise.append((_bytes_in(watched.store) - before) / (12 * 1300))
        watched.close()
        scanned.close()

    print(f"rewind checkpoints, {args.files} files in {args.files // 100} folders, {args.runs} runs (medians)")
    print(f"  first checkpoint (copy of every file): {first[0][0]:.0f} ms CPU, {first[0][1]:.0f} ms wall")
    base_cpu = _median([c for c, _ in unchanged["stat"]])
    for name in ("stat", "inotify", "scan"):
        cpu, wall = _median([c for c, _ in unchanged[name]]), _median([w for _, w in unchanged[name]])
        label = {
            "stat": "baseline: one os.stat",
            "inotify": "unchanged turn, inotify",
            "scan": "unchanged turn, no inotify (every folder)",
        }[name]
        print(
            f"  {label}: {cpu:.3f} ms CPU, {wall:.3f} ms wall"
            + ("" if name == "stat" else f"  ({cpu / base_cpu:.0f}x the baseline's CPU)" if base_cpu else "")
        )
    print(
        f"  changed turn (10 files changed, 2 added): {_median([c for c, _ in changed]):.2f} ms CPU, "
        f"{_median([w for _, w in changed]):.2f} ms wall"
    )
    print(f"  store growth / bytes changed, 12 small files (~1.3 KB): {_median(growth):.3f}x (max {max(growth):.3f}x)")
    print(
        f"  store growth / bytes changed, 12 random files of 1,300 bytes: {_median(noise):.3f}x (max {max(noise):.3f}x)"
    )
    print(f"  store growth / bytes changed, one 1 MiB file: {_median(large):.4f}x (max {max(large):.4f}x)")
    print(
        f"  rewind of those 12 paths: {_median([c for c, _ in rewinds]):.2f} ms CPU, "
        f"{_median([w for _, w in rewinds]):.2f} ms wall"
    )


if __name__ == "__main__":
    main()
