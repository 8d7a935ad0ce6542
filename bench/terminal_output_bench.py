"""What a cell's output costs to reach the screen through the real terminal, plain against crafted.

    python bench/terminal_output_bench.py [--size 500000] [--rounds 2]

The real `freeact-sub` runs in a pseudo-terminal (200 columns) on a scripted model (the demo server over the
OpenAI protocol), auto-approving; each prompt has the model run one cell that prints `--size` characters of one
kind, then answer `DONE`. The time is from the prompt sent to the answer read from the pty (the cell, the kernel's
messages, the host's reader, the renderer, the pty): kinds alternated round by round, each one's median and its
ratio to plain text of the same size.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from freeact_sub.demo.replies import Reply, ToolCall
from freeact_sub.demo.server import DemoServer
from tests.e2e.terminal_driver import Terminal, cli_env

KINDS = {
    "plain": "('2026-11-29 01:02:03 INFO worker-7 processed batch 1234 of 9999 in 0.42 s (ok)\\n' * (SIZE // 80))",
    "empty lines": "'\\n' * SIZE",
    "one-character lines": "'x\\n' * (SIZE // 2)",
    "coloured lines": "(chr(27) + '[31mx' + chr(27) + '[0m\\n') * (SIZE // 10)",
    "tabs": "'\\t' * SIZE",
}


def responder(size: int) -> Any:
    def respond(body: Mapping[str, Any]) -> Reply:
        messages = body["messages"]
        last_user = max(index for index, message in enumerate(messages) if message.get("role") == "user")
        kind = str(messages[last_user].get("content")).removeprefix("print ")
        if any(message.get("role") == "tool" for message in messages[last_user:]):
            return Reply(text=f"DONE {kind}")
        code = f"SIZE = {size}\nprint({KINDS[kind]}, end='')"
        return Reply(text="", tool_calls=(ToolCall("execute_ipython_cell", {"code": code}, id=f"c{time.time_ns()}"),))

    return respond


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    server = DemoServer(responder=responder(args.size), chunk_delay=0.001).start()
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    try:
        with tempfile.TemporaryDirectory() as folder:
            term = Terminal(
                "--model", "bench", "--base-url", server.base_url, "--auto-approve", cwd=Path(folder), env=cli_env()
            )
            try:
                term.expect(r"you ›")
                child = term.child  # read the pty with pexpect's own window: the driver re-reads all it kept
                term.send("print tabs\r")  # a warm-up: the kernel's first cell
                child.expect("DONE tabs", timeout=600, searchwindowsize=4000)
                child.expect("you ›", timeout=60, searchwindowsize=4000)
                for _ in range(args.rounds):
                    for kind in KINDS:
                        start = time.perf_counter()
                        term.send(f"print {kind}\r")
                        child.expect(re.escape(f"DONE {kind}"), timeout=600, searchwindowsize=4000)
                        times[kind].append(time.perf_counter() - start)
                        child.expect("you ›", timeout=60, searchwindowsize=4000)
                term.send("\x04")
                term.wait_exit()
            finally:
                term.kill()
    finally:
        server.close()
    plain = statistics.median(times["plain"])
    for kind, values in times.items():
        median = statistics.median(values)
        print(f"{kind:22s} {median:7.2f} s   {median / plain:5.2f}x plain   ({', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
