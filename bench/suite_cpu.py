"""Where a command's CPU goes, by kind of process: run it (the test suite, say), sample its whole process tree every
quarter second, and print the CPU seconds of each kind (kernels, CLI runs, MCP servers, browsers, ...).

    python bench/suite_cpu.py --save run.json -- .venv/bin/python -m pytest -n 2
    python bench/suite_cpu.py --load run.json

A process is counted with the CPU it had when last seen, so one that lived less than a quarter second may be
missed or undercounted (they cost little). Processes that leave the tree (a daemon whose parent exited) are lost.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import time

import psutil

KINDS: list[tuple[str, str]] = [
    ("pytest worker", r"exec\(eval\(sys.stdin"),
    ("pytest", r"-m pytest"),
    ("kernel launched", r"_ipykernel_launcher|ipykernel_launcher"),
    ("kernel forked by a zygote", r"_kernel_zygote"),  # a forked kernel keeps its zygote's command line
    ("sandbox wrapper", r"run_confined"),
    ("calc MCP server (tests)", r"calc_server"),
    ("files MCP server (tests)", r"files_server"),
    ("demo MCP server (stdio)", r"demo/mcp_server"),
    ("mcp-server-time", r"mcp_server_time"),
    ("npm MCP server", r"server-filesystem|modelcontextprotocol"),
    ("freeact-sub command", r"freeact_sub\.terminal\.cli|bin/freeact-sub|freeact_sub\.cli|-m freeact_sub"),
    ("JupyterLab", r"jupyter[-_ ]?lab|jupyter_server"),
    ("kernel gateway", r"kernel_gateway|enterprise_gateway"),
    ("Chromium", r"chrom"),
    ("node", r"\bnode\b"),
    ("docs examples", r"docs_examples"),
    ("mkdocs", r"mkdocs"),
    ("pip", r"\bpip\b"),
    ("other Python", r"python"),
]


def sample(command: list[str]) -> dict[str, object]:
    """Run `command` to its end, sampling its tree; each process's CPU (last seen) and command line."""
    started = time.monotonic()
    process = subprocess.Popen(command)
    root = psutil.Process(process.pid)
    seen: dict[int, tuple[float, str]] = {}
    while process.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = []
        for member in tree:
            try:
                times = member.cpu_times()
                line = seen[member.pid][1] if member.pid in seen else " ".join(member.cmdline())[:300] or member.name()
                seen[member.pid] = (times.user + times.system, line)
            except psutil.Error:
                continue
        time.sleep(0.25)
    return {
        "wall": time.monotonic() - started,
        "returncode": process.returncode,
        "processes": {str(pid): list(value) for pid, value in seen.items()},
    }


def kind_of(line: str) -> str:
    return next((name for name, pattern in KINDS if re.search(pattern, line)), "other: " + line.split(" ")[0][-30:])


def report(run: dict[str, object]) -> None:
    cpu: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    processes = run["processes"]
    assert isinstance(processes, dict)
    for seconds, line in processes.values():
        kind = kind_of(line)
        cpu[kind] += seconds
        count[kind] += 1
    total = sum(cpu.values())
    print(f"wall {run['wall']:.0f} s, CPU {total:.0f} s in {len(processes)} processes")
    print(f"{'kind':28} {'processes':>9} {'CPU s':>8} {'share':>6} {'s each':>7}")
    for kind, seconds in cpu.most_common():
        print(f"{kind:28} {count[kind]:9} {seconds:8.0f} {100 * seconds / total:5.1f}% {seconds / count[kind]:7.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--save", help="write the samples to this JSON file")
    parser.add_argument("--load", help="report on samples saved earlier instead of running a command")
    parser.add_argument("command", nargs="*", help="the command to run (after --)")
    args = parser.parse_args()
    if args.load:
        with open(args.load, encoding="utf-8") as saved:
            run = json.load(saved)
    elif args.command:
        run = sample(args.command)
        if args.save:
            with open(args.save, "w", encoding="utf-8") as out:
                json.dump(run, out)
    else:
        parser.error("give a command to run, or --load")
    report(run)
    return int(run.get("returncode") or 0) if not args.load else 0


if __name__ == "__main__":
    sys.exit(main())
