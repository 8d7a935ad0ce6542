"""Where a one-shot's CPU goes: the host's imports by library, and the kernel's start, against the 3 s goal.

    python bench/start_imports.py [--runs 5]

A demo one-shot (`freeact-sub --demo -p "one cell" --auto-approve`) is run once in a fresh folder to record the
modules its host process ends with, in the order it imported them. Then, `--runs` times, a fresh interpreter
imports that list group by group (the garbage collector paced as the command paces it, `start_gc.py`) and reads its
CPU clock after each group; a module shared by two groups counts for the first. Last, the kernel a one-shot starts
(`kernels/_ipykernel_launcher.py`, launched as the host launches it, no sandbox) is timed from its start to the end
of one cell, its CPU read from `wait4`. What it prints, per group: the median CPU seconds (min–max) and the share
of the host's imports; then what no change of ours can cut — the libraries a one-shot must load (pydantic-ai with
the provider's SDK, `mcp`) plus the kernel — against the goal.

The groups are cumulative in the order listed: "pydantic-ai" is what it adds once the `openai` SDK is loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["GROUPS", "host_modules", "import_budget", "kernel_cpu"]

GOAL_CPU = 3.0
"""The one-shot's goal: CPU seconds of all its processes (issue 38)."""

GROUPS: list[tuple[str, list[str]]] = [
    ("stdlib", []),
    ("pydantic", ["pydantic", "pydantic_core", "typing_extensions", "annotated_types", "typing_inspection"]),
    ("rich, markdown-it, pygments (terminal)", ["rich", "markdown_it", "mdurl", "pygments"]),
    (
        "jupyter_client, zmq (kernel client)",
        ["jupyter_client", "zmq", "tornado", "traitlets", "jupyter_core", "dateutil", "platformdirs"],
    ),
    (
        "uvicorn, starlette (demo server)",
        ["uvicorn", "starlette", "click", "h11", "anyio", "sniffio", "idna", "sse_starlette"],
    ),
    ("openai SDK", ["openai", "jiter", "distro", "tqdm"]),
    (
        "pydantic-ai (with its OpenAI model)",
        [
            "pydantic_ai",
            "pydantic_graph",
            "griffe",
            "genai_prices",
            "httpx",
            "httpcore",
            "httpx2",
            "httpcore2",
            "logfire_api",
            "opentelemetry",
            "certifi",
            "colorama",
        ],
    ),
    (
        "mcp (client, server, two protocol versions)",
        [
            "mcp",
            "mcp_types",
            "cryptography",
            "jwt",
            "pydantic_settings",
            "dotenv",
            "multipart",
            "python_multipart",
            "httpx_sse",
        ],
    ),
    ("jsonschema", ["jsonschema", "jsonschema_specifications", "referencing", "rpds", "attr", "attrs"]),
    ("other libraries", []),
    ("freeact_sub (ours)", ["freeact_sub"]),
]
"""Each group's packages and modules (the longest name that matches decides); the standard library is the first
group, a library named nowhere is in "other libraries"."""

UNAVOIDABLE = ("openai SDK", "pydantic-ai (with its OpenAI model)", "mcp (client, server, two protocol versions)")
"""What a demo one-shot cannot leave out: its model goes through pydantic-ai's OpenAI model, its tools through `mcp`."""

_RECORD = (
    "import atexit, json, sys\n"
    "path = sys.argv[1]\n"
    "atexit.register(lambda: json.dump(list(sys.modules), open(path, 'w')))\n"
    "from freeact_sub.cli import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)

_IMPORT_GROUPS = r"""
import importlib, json, sys, time
from freeact_sub.start_gc import starting
modules, groups = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
recorded = set(modules)


class OnlyRecorded:  # what the host did not import is not importable here either (an optional library it skipped)
    def find_spec(self, name, path=None, target=None):
        if name not in recorded:
            raise ModuleNotFoundError(name)


sys.meta_path.insert(0, OnlyRecorded())
starting()
stdlib = set(sys.stdlib_module_names)


def group_of(module):
    best, length = None, -1
    for name, prefixes in groups:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
                best, length = name, len(prefix)
    if best is None:
        best = groups[0][0] if module.split(".")[0] in stdlib else "other libraries"
    return best


spent = {}
for name, _ in groups:
    began = time.process_time()
    for module in modules:
        if group_of(module) == name and module not in sys.modules:
            try:
                importlib.import_module(module)
            except BaseException:
                pass  # a module that imports only in its own context (a `__main__`, a platform's)
    spent[name] = time.process_time() - began
print(json.dumps(spent))
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FREEACT_SUB_") and not k.endswith("_API_KEY")}
    env["FREEACT_SUB_DEMO_CHUNK_DELAY"] = "0"
    return env


def host_modules(path: Path) -> list[str]:
    """Run a demo one-shot once, in a fresh folder, and write the modules its host ended with to `path`."""
    folder = tempfile.mkdtemp(prefix="start-imports-")
    try:
        subprocess.run(
            [sys.executable, "-c", _RECORD, str(path), "--demo", "-p", "one cell", "--auto-approve"],
            cwd=folder,
            env=_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
            timeout=120,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    modules: list[str] = json.loads(path.read_text(encoding="utf-8"))
    return modules


def import_budget(modules_file: Path) -> dict[str, float]:
    """One fresh interpreter's CPU seconds per group, importing the host's modules group by group."""
    groups = json.dumps(GROUPS)
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_GROUPS, str(modules_file), groups],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    spent: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return spent


def kernel_cpu() -> float:
    """CPU seconds of the kernel a one-shot launches, from its start to the end of one cell and its shutdown."""
    from jupyter_client import KernelManager

    import freeact_sub

    launcher = Path(freeact_sub.__file__).parent / "kernels" / "_ipykernel_launcher.py"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    manager = KernelManager()
    manager.kernel_cmd = [
        sys.executable,
        str(launcher),
        "-f",
        "{connection_file}",
        "--HistoryManager.hist_file=:memory:",
    ]
    manager.start_kernel(stderr=subprocess.DEVNULL)
    try:
        client = manager.client()
        client.start_channels()
        client.wait_for_ready(timeout=60)
        client.execute_interactive("print(sum(range(1, 101)))", timeout=60, output_hook=lambda message: None)
        client.stop_channels()
    finally:
        manager.shutdown_kernel(now=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def table(spent: list[dict[str, float]], kernel: list[float]) -> str:
    """The groups' medians, their shares, and what a one-shot cannot cut against the goal."""
    total = statistics.median(sum(run.values()) for run in spent)
    lines = [f"{'the one-shot host imports':<46} {'CPU s (min–max)':>20} {'share':>6}"]
    for name, _ in GROUPS:
        values = [run[name] for run in spent]
        middle = statistics.median(values)
        lines.append(f"{name:<46} {middle:>7.3f} ({min(values):.3f}–{max(values):.3f}) {middle / total:>6.0%}")
    lines.append(f"{'all of them':<46} {total:>7.3f}")
    floor = statistics.median(sum(run[name] for name in UNAVOIDABLE) for run in spent)
    kernel_middle = statistics.median(kernel)
    lines.append(
        f"{'the kernel (start to one cell, then shutdown)':<46} {kernel_middle:>7.3f} "
        f"({min(kernel):.3f}–{max(kernel):.3f})"
    )
    lines.append(
        f"what no change of ours cuts: pydantic-ai + openai + mcp {floor:.2f} s + the kernel "
        f"{kernel_middle:.2f} s = {floor + kernel_middle:.2f} s of CPU, against the goal of ≤ {GOAL_CPU} s"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", metavar="FILE", help="also write the samples as JSON")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="start-imports-") as folder:
        modules_file = Path(folder) / "modules.json"
        modules = host_modules(modules_file)
        spent, kernel = [], []
        for _ in range(args.runs):  # alternated: an import run, then a kernel
            spent.append(import_budget(modules_file))
            kernel.append(kernel_cpu())
    print(table(spent, kernel))
    print(
        f"{len(modules)} modules in the host; {os.cpu_count()} cores, load {load:.2f} before and "
        f"{os.getloadavg()[0]:.2f} after; {args.runs} runs; {time.strftime('%Y-%m-%d %H:%M')}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"imports": spent, "kernel": kernel}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
