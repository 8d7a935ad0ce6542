"""`python -m bench` (the benchmark suite of docs/performance.md) starts: its module builds and its help prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmark_suite_starts_and_prints_its_help() -> None:
    done = subprocess.run([sys.executable, "-m", "bench", "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "python -m bench [--quick]" in done.stdout
