"""How long a first prompt takes to its first chunk: through ACP (`freeact-sub acp --demo`) and the terminal.

    python bench/acp_first_chunk_bench.py [--runs 3]

Both run the same demo model (`FREEACT_SUB_DEMO_CHUNK_DELAY=0`) in a fresh temporary folder, alternating
run by run, the same prompt ("compute it in one cell": the model thinks aloud first):

- ACP: the SDK's client spawns `freeact-sub acp --demo`, `initialize`, `session/new` (the kernel and MCP
  servers start here), `session/prompt`; the clock stops at the first `agent_thought_chunk`;
- terminal: `freeact-sub --demo` in a pseudo-terminal (pexpect), the prompt typed once the `you ›`
  prompt shows; the clock stops when the model's first words are on the screen.

It prints, per front end, the median time from starting the process to the first chunk, and from
sending the prompt to the first chunk. No target: it says what speaking ACP costs over the terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from typing import Any

PROMPT = "compute it in one cell"
FIRST_WORDS = "One quick computation"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FREEACT_SUB_") and not k.endswith("_API_KEY")}
    env.update(FREEACT_SUB_DEMO_CHUNK_DELAY="0", TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1", COLORFGBG="15;0")
    return env


class _FirstChunk:
    def __init__(self) -> None:
        self.seen = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if update.session_update in ("agent_thought_chunk", "agent_message_chunk"):
            self.seen.set()

    async def request_permission(self, **kwargs: Any) -> Any:
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id="once"))

    def on_connect(self, conn: Any) -> None:
        pass


async def acp_run(folder: str) -> tuple[float, float]:
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block

    client = _FirstChunk()
    started = time.perf_counter()
    async with spawn_agent_process(client, sys.executable, "-m", "freeact_sub.cli", "acp", "--demo", cwd=folder,
                                   env=_env(), transport_kwargs={"shutdown_timeout": 30}) as (conn, _):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = await conn.new_session(cwd=folder, mcp_servers=[])
        sent = time.perf_counter()
        turn = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[text_block(PROMPT)]))
        await client.seen.wait()
        first = time.perf_counter()
        await turn
    return first - started, first - sent


def terminal_run(folder: str) -> tuple[float, float]:
    import pexpect

    started = time.perf_counter()
    child = pexpect.spawn(sys.executable, ["-m", "freeact_sub.cli", "--demo"], cwd=folder, env=_env(),
                          dimensions=(60, 200), encoding="utf-8", codec_errors="replace", timeout=120)
    try:
        child.expect("you ›")
        sent = time.perf_counter()
        child.send(PROMPT + "\r")
        child.expect(FIRST_WORDS)
        first = time.perf_counter()
        child.expect(r"Run this code\?")
        child.send("y")
        child.expect("5050")
        child.expect("you ›")
        child.sendcontrol("d")
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close(force=True)
    return first - started, first - sent


async def main(runs: int) -> None:
    times: dict[str, list[tuple[float, float]]] = {"acp": [], "terminal": []}
    for run in range(runs):
        for shape in ("acp", "terminal") if run % 2 == 0 else ("terminal", "acp"):
            with tempfile.TemporaryDirectory() as folder:
                result = await acp_run(folder) if shape == "acp" else terminal_run(folder)
            times[shape].append(result)
            print(f"run {run + 1} {shape:8}  start → first chunk {result[0]:5.2f} s   prompt → first chunk "
                  f"{result[1]:5.2f} s", flush=True)
    for shape, values in times.items():
        total = statistics.median(v[0] for v in values)
        prompt = statistics.median(v[1] for v in values)
        print(f"median {shape:8}  start → first chunk {total:5.2f} s   prompt → first chunk {prompt:5.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    asyncio.run(main(parser.parse_args().runs))
