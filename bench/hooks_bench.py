"""What a hook costs a tool call: a no-op callable and a no-op shell command, against no hook, in one run.

    python bench/hooks_bench.py [--calls 2000] [--commands 100]

Times `Hooks.ask("PreToolUse", ...)` as the tool-call step runs it (build the payload, run each
hook that applies, check the answer), median per call. Targets: <= 0.1 ms for a no-op callable,
<= 30 ms for a no-op shell command.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from typing import Any

from freeact_sub.policy.hooks import Hooks, HookSpec, hook_table

CONTEXT = {"agent_id": "agent-0bench", "parent_id": None, "agent_type": "general", "session_id": None, "cwd": "."}
FIELDS = {"tool_name": "execute_ipython_cell", "tool_input": {"code": "x = 1"}, "tool_use_id": "call-1"}


def noop(moment: dict[str, Any]) -> None:
    return None


async def per_call(hooks: Hooks, count: int) -> float:
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        if hooks.wants("PreToolUse"):
            await hooks.ask("PreToolUse", CONTEXT, FIELDS, lambda event: None, tool_name="execute_ipython_cell")
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


async def main(calls: int, commands: int) -> None:
    none = Hooks()
    callable_hook = Hooks(hook_table({"PreToolUse": [HookSpec(hook=noop)]}))
    shell_hook = Hooks(hook_table({"PreToolUse": [{"command": "true"}]}))
    baseline = await per_call(none, calls)
    with_callable = await per_call(callable_hook, calls)
    with_command = await per_call(shell_hook, commands)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"no hook: {baseline * 1e6:.1f} us per call")
    print(f"no-op callable: {with_callable * 1e3:.4f} ms per call, +{(with_callable - baseline) * 1e3:.4f} ms "
          "(target <= 0.1 ms)")
    print(f"no-op shell command (`true`): {with_command * 1e3:.2f} ms per call (target <= 30 ms)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--commands", type=int, default=100)
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.commands))
