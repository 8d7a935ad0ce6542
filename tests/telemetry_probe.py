"""Run one agent (a scripted model, one cell) in a fresh process and say what telemetry left behind, as JSON.

`python -m tests.telemetry_probe off` runs it with telemetry off; `on` with an OTLP endpoint in the
environment (`OTEL_EXPORTER_OTLP_ENDPOINT`, set by the test). It prints whether the OpenTelemetry SDK
was imported, the SDK's export threads that are alive while the agent runs, how long `stop()` took,
and the run's answer. A fresh process is the only place where "never imported" can be seen.

`off-then-on` runs both in one process, off first (the off run's report is taken before anything imports the
SDK), then on with `$PROBE_OTLP_ENDPOINT` as the endpoint. `tree` runs a tree instead (a `task`, a background
`task`, a cell whose `map_tasks` starts five children) with telemetry on, exporting to the endpoint, and prints
each agent's usage and the main agent's id.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from freeact_sub import Agent, AgentConfig
from tests.scripting import Call, Script, drive


def _export_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("Otel"))


async def main(mode: str) -> dict[str, object]:
    script = Script([Call("execute_ipython_cell", {"code": "print(6 * 7)"})], ["It is 42."])
    with tempfile.TemporaryDirectory() as folder:
        config = AgentConfig(model=script.model, working_dir=Path(folder), kernel_pool_size=0, mcp_pool_size=0,
                             auto_approve=True, telemetry=mode == "on")
        agent = Agent(config)
        await agent.start()
        try:
            events = await drive(agent.stream("What is 6 * 7?"), limit=60)
            threads = _export_threads()
        finally:
            began = time.monotonic()
            await agent.stop()
            stopped = time.monotonic() - began
    answer = [e.content for e in events if type(e).__name__ == "Response" and e.final]
    return {"sdk_imported": any(name.startswith("opentelemetry.sdk") for name in sys.modules),
            "threads": threads, "stop_seconds": stopped, "answer": answer}


TREE_CELL = """
from freeact_sub_tasks import map_tasks
out = await map_tasks("Label row {}", range(5), agent_type="labeler")
print(len(out))
"""


async def tree() -> dict[str, object]:
    from pydantic_ai.models.function import FunctionModel

    from freeact_sub.config.definitions import AgentType
    from tests.scripting import first_prompt

    parent = Script(
        [Call("task", {"prompt": "CHILD-a: add", "subagent_type": "labeler"}, id="t-a"),
         Call("task", {"prompt": "CHILD-bg: later", "subagent_type": "labeler", "run_in_background": True},
              id="t-bg"),
         Call("execute_ipython_cell", {"code": TREE_CELL}, id="cell")],
        ["done"],
    )

    async def model(messages, info):  # type: ignore[no-untyped-def]
        prompt = first_prompt(messages)
        if prompt.startswith("MAIN"):
            async for item in parent._stream(messages, info):
                yield item
            return
        await asyncio.sleep(0.01)
        yield f"answer to {prompt[:40]}"

    with tempfile.TemporaryDirectory() as folder:
        config = AgentConfig(model=FunctionModel(stream_function=model, model_name="scripted"),
                             working_dir=Path(folder), kernel_pool_size=0, mcp_pool_size=0, max_subagents=4,
                             auto_approve=True, telemetry=True,
                             agents={"labeler": AgentType(description="Labels one row.", tools=[])})
        async with Agent(config) as agent:
            await drive(agent.stream("MAIN JOB: go"), limit=60)
            for _ in range(1000):  # the background child ends between turns
                if not agent.subagents():
                    break
                await asyncio.sleep(0.02)
            usage = {a: [u.input_tokens, u.output_tokens] for a, u in agent.usage.by_agent.items()}
            main_id = agent.agent_id
    return {"usage": usage, "main": main_id}


async def off_then_on() -> dict[str, object]:
    """Off first (nothing of the SDK may be imported yet), then on in the same process: one interpreter start."""
    off = await main("off")
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = os.environ.pop("PROBE_OTLP_ENDPOINT")  # kept out of the off run
    return {"off": off, "on": await main("on")}


if __name__ == "__main__":
    mode = sys.argv[1]
    report = asyncio.run(tree() if mode == "tree" else off_then_on() if mode == "off-then-on" else main(mode))
    print(json.dumps(report))
