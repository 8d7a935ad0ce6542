"""MCP tools from code: context saved and call overhead, measured in one run on this machine.

    python bench/code_tools_bench.py [--calls 200]

(1) Context saved: the size of the first model request (system prompt, user prompt and the tool
    definitions sent with it) for an agent with 3 MCP servers of 20 tools each, in
    `mcp_tools="calls"` (every schema in every request) vs `mcp_tools="code"` (a paragraph that
    names the modules; the model reads the sources it needs). Characters are exact; tokens
    are estimated at 4 characters per token, as no tokenizer's vocabulary is available offline.
(2) Call overhead: the median round trip of `--calls` calls of a trivial tool (`calc.echo`) made
    from a cell's code (kernel -> private socket -> approval by a standing decision -> the
    agent's MCP session -> back) vs the same calls made directly on an `mcp` `ClientSession`
    in this process. Target: at most 2 ms added per call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from freeact_sub import Agent, AgentConfig, CodeExecutionOutput

ROOT = Path(__file__).resolve().parent.parent
CALC = {"command": sys.executable, "args": [str(ROOT / "tests" / "servers" / "calc_server.py")]}
WIDE = ROOT / "bench" / "servers" / "wide_server.py"
SERVERS = {name: {"command": sys.executable, "args": [str(WIDE), name]} for name in ("tracker", "docs", "crm")}


async def first_request_size(mode: str, workdir: Path) -> tuple[int, int]:
    """Characters of the first request in `mode` (prompts + tool definitions), and how many tools it offers."""
    seen: dict[str, Any] = {}

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> Any:
        seen["messages"], seen["tools"] = messages, info.function_tools
        yield "ok"

    config = AgentConfig(
        model=FunctionModel(stream_function=respond), working_dir=workdir, mcp_servers=SERVERS,
        enable_subagents=False, mcp_tools=mode, save_sessions=False,
    )
    async with Agent(config) as agent:
        async for _ in agent.stream("List my open issues."):
            pass
    prompt_chars = sum(len(getattr(part, "content", "")) for part in seen["messages"][0].parts)
    tools = [
        {"name": t.name, "description": t.description, "parameters": t.parameters_json_schema} for t in seen["tools"]
    ]
    return prompt_chars + len(json.dumps(tools)), len(tools)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def direct_calls(count: int) -> list[float]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=CALC["command"], args=CALC["args"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.call_tool("echo", {"text": "warm-up"})
        samples = []
        for i in range(count):
            started = time.perf_counter()
            await session.call_tool("echo", {"text": f"call {i}"})
            samples.append(time.perf_counter() - started)
        return samples


CELL = """
import time, json
from mcptools.calc import echo
echo(text="warm-up")
samples = []
for i in range({count}):
    started = time.perf_counter()
    echo(text=f"call {{i}}")
    samples.append(time.perf_counter() - started)
print("SAMPLES", json.dumps(samples))
"""


async def calls_from_code(count: int, workdir: Path) -> list[float]:
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> Any:
        if len(messages) == 1:
            arguments = json.dumps({"code": CELL.format(count=count)})
            yield {0: DeltaToolCall(name="execute_ipython_cell", json_args=arguments, tool_call_id="bench")}
        else:
            yield "done"

    config = AgentConfig(
        model=FunctionModel(stream_function=respond), working_dir=workdir, mcp_servers={"calc": CALC},
        enable_subagents=False, auto_approve=True, mcp_tools="code", save_sessions=False,
    )
    text = ""
    async with Agent(config) as agent:
        async for event in agent.stream("echo many times"):
            if isinstance(event, CodeExecutionOutput):
                text = event.content
    marker = text.find("SAMPLES ")
    if marker < 0:
        raise RuntimeError(f"the cell failed:\n{text}")
    return list(json.loads(text[marker + len("SAMPLES "):].splitlines()[0]))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        calls_chars, calls_tools = await first_request_size("calls", workdir / "calls")
        code_chars, code_tools = await first_request_size("code", workdir / "code")
        print("(1) First model request, 3 MCP servers x 20 tools")
        for mode, chars, tools in (("calls", calls_chars, calls_tools), ("code", code_chars, code_tools)):
            print(f"    {mode + ' mode:':<11} {chars:>7,} characters (~{chars // 4:,} tokens), {tools} tools offered")
        print(f"    code / calls = {code_chars / calls_chars:.2f}  ({1 - code_chars / calls_chars:.0%} smaller)")

        direct = await direct_calls(options.calls)
        from_code = await calls_from_code(options.calls, workdir / "overhead")
    direct_ms, code_ms = median_ms(direct), median_ms(from_code)
    print(f"(2) {options.calls} calls of calc.echo, median round trip")
    print(f"    direct ClientSession in the host: {direct_ms:.2f} ms")
    print(f"    from a cell's code (approved):    {code_ms:.2f} ms")
    print(f"    added per call: {code_ms - direct_ms:.2f} ms (target <= 2 ms); ratio {code_ms / direct_ms:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
