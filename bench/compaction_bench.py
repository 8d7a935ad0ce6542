"""What compaction costs and saves: a long scripted session (real HTTP, the OpenAI protocol, a real kernel), each
round a tiny cell that prints ~1,000 characters, against a provider whose context window refuses longer requests.

Two runs: `auto` (the window set, `compact_at` 0.85: compacts before it would overflow) and `overflow` (no window
known: each compaction follows a refused request). For each: how often it compacted, one compaction's own request
(its input and output tokens), the tokens it took off the history, and the input tokens of all the rounds' requests
against those of the same rounds without compaction (the history growing by the measured amount a round; a real
provider would have refused them past the window).

    python -m bench.compaction_bench [rounds] [window]
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

from freeact_sub import Agent, AgentConfig, ContextCompacted, ModelUsage
from freeact_sub.demo import DemoServer
from freeact_sub.demo.faults import ContextLimit
from tests.e2e.test_compaction_e2e import respond
from tests.scripting import drive


async def one_run(rounds: int, window: int, mode: str) -> dict[str, float]:
    limit = ContextLimit(window)
    settings = {"context_window": window, "compact_at": 0.85} if mode == "auto" else {"compact_at": None}
    with DemoServer(responder=respond, chunk_delay=0, faults=limit).start() as server, \
            tempfile.TemporaryDirectory() as folder:
        config = AgentConfig(model="openai:scripted", base_url=server.base_url_for("openai"), working_dir=Path(folder),
                             auto_approve=True, enable_subagents=False, kernel_pool_size=0, mcp_pool_size=0,
                             compact_keep_rounds=2, system_prompt="You count with cells.", **settings)
        async with Agent(config) as agent:
            began = time.perf_counter()
            events = await drive(agent.stream(f"Count to {rounds} with cells."))
            seconds = time.perf_counter() - began
    compactions = [e for e in events if isinstance(e, ContextCompacted)]
    summaries = [events[i - 1] for i, e in enumerate(events) if isinstance(e, ContextCompacted)]
    usage = [e for e in events if isinstance(e, ModelUsage) and e not in summaries]
    round_inputs = [u.input_tokens for u in usage]
    growth = statistics.median(b - a for a, b in itertools.pairwise(round_inputs) if b > a)
    without = sum(round_inputs[0] + growth * i for i in range(len(round_inputs)))
    return {
        "seconds": seconds, "compactions": len(compactions), "refused": limit.refused,
        "summary_in": statistics.mean(s.input_tokens for s in summaries),  # type: ignore[attr-defined]
        "summary_out": statistics.mean(s.output_tokens for s in summaries),  # type: ignore[attr-defined]
        "before": statistics.mean(c.tokens_before for c in compactions),
        "after": statistics.mean(c.tokens_after for c in compactions),
        "inputs": sum(round_inputs) + sum(s.input_tokens for s in summaries),  # type: ignore[attr-defined]
        "without": without, "largest": limit.largest,
    }


async def main(rounds: int, window: int) -> None:
    for mode in ("auto", "overflow"):
        r = await one_run(rounds, window, mode)
        print(f"{mode:8} {rounds} rounds in {r['seconds']:.1f} s: {r['compactions']} compactions "
              f"({r['refused']} refused requests), largest request {r['largest']} tokens; one compaction's request "
              f"{r['summary_in']:.0f} in + {r['summary_out']:.0f} out, history {r['before']:.0f} → {r['after']:.0f} "
              f"tokens; all requests {r['inputs']:,.0f} input tokens, {r['without']:,.0f} without compaction")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300, int(sys.argv[2]) if len(sys.argv) > 2 else 8000))
