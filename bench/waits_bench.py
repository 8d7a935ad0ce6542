"""Where a person waits: `--help`, the interactive prompt, a one-shot, and an ACP client's first replies.

    python bench/waits_bench.py [--runs 5]

Each is the installed `freeact-sub` command (next to this interpreter) in a fresh temporary folder, offline
(`--demo`), run `--runs` times, alternating the rows run by run, against the floor measured in the same
run: this interpreter started with `-c pass`, and its CPU. What it prints, per row: the median wall time
(and min–max), the median CPU seconds of every process of the run (the command's and its children's,
kernels and servers included, from `wait4`), the goal, and whether the median meets it.

- help: `freeact-sub --help` until it exits;
- prompt: `freeact-sub --demo` in a pseudo-terminal until `you ›` shows (the agent starts behind it);
  the banner row is when the start has finished (the banner is up);
- one-shot: `freeact-sub --demo -p "one cell" --auto-approve` until it exits (one model turn, one cell);
- ACP initialize / session/new: `freeact-sub acp --demo`, from the process's start to each answer.

`--baseline DIR` also times the code checked out in DIR (`git archive main | tar -x -C DIR`), put first on the
command's `PYTHONPATH`, alternated with this code run by run: a paired comparison on the same machine, one table each.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["GOALS", "Sample", "measure", "table"]

COMMAND = str(Path(sys.executable).with_name("freeact-sub"))

GOALS: dict[str, tuple[float | None, float | None]] = {
    "help": (0.3, None),
    "prompt": (0.5, None),
    "banner (agent started)": (None, None),
    "one-shot, one cell": (2.5, 3.0),
    "ACP initialize": (0.5, None),
    "ACP session/new": (1.0, None),
}
"""Per row: the goal for the median wall time and for the CPU of all processes (None: no goal), in seconds."""


@dataclass
class Sample:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


PYTHONPATH: str | None = None
"""The checkout the rows are timed against (`--baseline`), while they are; None: this code."""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FREEACT_SUB_") and not k.endswith("_API_KEY")}
    env.update(FREEACT_SUB_DEMO_CHUNK_DELAY="0", TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1", COLORFGBG="15;0")
    env.pop("PYTHONPATH", None)
    if PYTHONPATH is not None:
        env["PYTHONPATH"] = PYTHONPATH
    return env


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _timed(argv: list[str], cwd: str) -> tuple[float, float]:
    """Wall and CPU seconds (the process and its reaped descendants) of a command run to its end."""
    cpu = _children_cpu()
    began = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False, timeout=120)
    return time.perf_counter() - began, _children_cpu() - cpu


def _prompt(cwd: str) -> tuple[float, float]:
    """Seconds until `you ›` shows, and until the banner does."""
    import pexpect

    began = time.perf_counter()
    child = pexpect.spawn(COMMAND, ["--demo"], cwd=cwd, env=_env(), encoding="utf-8", dimensions=(50, 160),
                          timeout=120)
    try:
        seen: dict[int, float] = {}
        while len(seen) < 2:  # the prompt and the banner, in either order (before 0.2 the banner came first)
            seen.setdefault(child.expect(["you ›", "working dir"]), time.perf_counter() - began)
        prompt, banner = seen[0], seen[1]
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    return prompt, banner


def _acp(cwd: str) -> tuple[float, float]:
    """Seconds from the start of `freeact-sub acp --demo` to its `initialize` answer, and to its `session/new` one."""
    began = time.perf_counter()
    process = subprocess.Popen([COMMAND, "acp", "--demo"], cwd=cwd, env=_env(), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdin is not None and process.stdout is not None
    to_agent, from_agent = process.stdin, process.stdout
    try:
        def ask(message_id: int, method: str, params: dict[str, Any]) -> float:
            message = {"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}
            to_agent.write(json.dumps(message).encode() + b"\n")
            to_agent.flush()
            while True:
                ready, _, _ = select.select([from_agent], [], [], 120)
                if not ready:
                    raise TimeoutError(method)
                answer = json.loads(from_agent.readline())
                if answer.get("id") == message_id:
                    if "error" in answer:
                        raise RuntimeError(f"{method}: {answer['error']}")
                    return time.perf_counter() - began

        initialized = ask(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        created = ask(1, "session/new", {"cwd": cwd, "mcpServers": []})
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return initialized, created


def measure(runs: int, baseline: str | None = None) -> dict[str, Any]:
    """Every row, `runs` times, alternated; and the interpreter's floor. With `baseline`, the same for the code
    checked out there (keys `… (baseline)`), run by run in turns with this code."""
    global PYTHONPATH
    if baseline is None:
        return _measure(runs)
    samples: dict[str, Any] = {}
    for run in range(runs):
        for path in ((None, baseline) if run % 2 == 0 else (baseline, None)):
            PYTHONPATH = path
            try:
                one = _measure(1)
            finally:
                PYTHONPATH = None
            for name, sample in one.items():
                key = name if path is None else f"{name} (baseline)"
                merged = samples.setdefault(key, {"wall": [], "cpu": []})
                merged["wall"] += sample["wall"]
                merged["cpu"] += sample["cpu"]
    return samples


def _measure(runs: int) -> dict[str, Any]:
    samples: dict[str, Sample] = {name: Sample() for name in ("floor", *GOALS)}

    def one(name: str, job: Callable[[str], Any]) -> Any:
        folder = tempfile.mkdtemp(prefix="waits-")
        try:
            return job(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    for _ in range(runs):
        wall, cpu = one("floor", lambda cwd: _timed([sys.executable, "-c", "pass"], cwd))
        samples["floor"].wall.append(wall)
        samples["floor"].cpu.append(cpu)
        wall, cpu = one("help", lambda cwd: _timed([COMMAND, "--help"], cwd))
        samples["help"].wall.append(wall)
        samples["help"].cpu.append(cpu)
        prompt, banner = one("prompt", _prompt)
        samples["prompt"].wall.append(prompt)
        samples["banner (agent started)"].wall.append(banner)
        wall, cpu = one("one-shot", lambda cwd: _timed([COMMAND, "--demo", "-p", "one cell", "--auto-approve"], cwd))
        samples["one-shot, one cell"].wall.append(wall)
        samples["one-shot, one cell"].cpu.append(cpu)
        initialized, created = one("acp", _acp)
        samples["ACP initialize"].wall.append(initialized)
        samples["ACP session/new"].wall.append(created)
    return {name: {"wall": sample.wall, "cpu": sample.cpu} for name, sample in samples.items()}


def table(results: dict[str, Any]) -> str:
    """The rows as text: median (min–max) wall, median CPU, the goal, whether it is met, the ratio to the floor."""
    if any(name.endswith(" (baseline)") for name in results):
        mine = {name: sample for name, sample in results.items() if not name.endswith(" (baseline)")}
        theirs = {name.removesuffix(" (baseline)"): sample for name, sample in results.items()
                  if name.endswith(" (baseline)")}
        return f"this code:\n{table(mine)}\n\nthe baseline (--baseline), same runs, alternated:\n{table(theirs)}"
    floor = statistics.median(results["floor"]["wall"])
    lines = [f"{'where a person waits':<26} {'wall (median, min–max)':>26} {'CPU':>7} {'goal':>14} {'met':>4}"
             f" {'× floor':>8}"]
    for name, sample in results.items():
        wall = statistics.median(sample["wall"])
        cpu = f"{statistics.median(sample['cpu']):.2f}" if sample["cpu"] else "—"
        wall_goal, cpu_goal = GOALS.get(name, (None, None))
        goal = " / ".join(f"≤ {value} s{' CPU' if i else ''}" for i, value in enumerate((wall_goal, cpu_goal))
                          if value is not None) or "—"
        met = "—"
        if wall_goal is not None or cpu_goal is not None:
            ok = (wall_goal is None or wall <= wall_goal) and (
                cpu_goal is None or (sample["cpu"] and statistics.median(sample["cpu"]) <= cpu_goal))
            met = "yes" if ok else "no"
        spread = f"{wall:.2f} ({min(sample['wall']):.2f}–{max(sample['wall']):.2f})"
        lines.append(f"{name:<26} {spread:>26} {cpu:>7} {goal:>14} {met:>4} {wall / floor:>8.1f}")
    return "\n".join(lines)


def main() -> int:
    global COMMAND
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--command", default=COMMAND, help="the freeact-sub command to time (default: installed)")
    parser.add_argument("--json", metavar="FILE", help="also write the samples as JSON")
    parser.add_argument("--baseline", metavar="DIR", help="also time the code checked out in DIR, alternated")
    args = parser.parse_args()
    COMMAND = args.command
    if not Path(COMMAND).exists():
        print(f"no freeact-sub command next to {sys.executable}: install the package first", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    results = measure(args.runs, args.baseline)
    print(table(results))
    print(f"{os.cpu_count()} cores, load {load:.2f} before and {os.getloadavg()[0]:.2f} after; {args.runs} runs")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
