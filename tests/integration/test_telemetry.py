"""OpenTelemetry traces and metrics of an agent tree (`AgentConfig(telemetry=True)`).

The module sets up the SDK's tracer and meter providers the way a program (or Logfire) does, with
the SDK's in-memory exporter and reader, and checks that the agent uses them as they are: one trace
per run, every child's run under the call that started it (a `task` call, a background `task`, a
cell's `map_tasks`), no orphan span, pydantic-ai's model request spans under their turns, tokens per
agent equal to `agent.usage`, content only when asked. One agent for the module; the children run no
code, so only the main agent has a kernel.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import pytest_asyncio
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from freeact_sub import Agent, AgentConfig, SubagentStarted
from freeact_sub.config.definitions import AgentType
from freeact_sub.telemetry.providers import FLUSH_SECONDS
from tests.scripting import Call, Script, drive, first_prompt, of, until

pytestmark = pytest.mark.asyncio(loop_scope="module")

PARENT = "MAIN JOB"
SECRET = "the-secret-prompt-words"

ROOT = Path(__file__).resolve().parents[2]
SPANS = InMemorySpanExporter()
READER = InMemoryMetricReader()


def _program_providers() -> None:
    """What a program does before it starts the agent (once per process: the API keeps the first)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(SPANS))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))


class Children:
    """The model of the whole tree: the parent's requests go to its script, each child answers its prompt."""

    def __init__(self, parent: Script) -> None:
        self.parent = parent
        self.model = FunctionModel(stream_function=self._stream, model_name="scripted")

    def _stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        prompt = first_prompt(messages)
        if PARENT in prompt:
            return self.parent._stream(messages, info)
        return self._answer(prompt)

    async def _answer(self, prompt: str) -> AsyncIterator[Any]:
        await asyncio.sleep(0.01)
        yield f"answer to {prompt[:40]} with a few more words"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory):
    _program_providers()
    script = Script()
    config = AgentConfig(
        model=Children(script).model, working_dir=tmp_path_factory.mktemp("telemetry"), kernel_pool_size=0,
        mcp_pool_size=0, max_subagents=4, auto_approve=True, telemetry=True, prestart_pools=True,
        agents={"labeler": AgentType(description="Labels one row.", tools=[])},
    )
    async with Agent(config) as agent:
        # the tree's kernel zygote serves the module: up before the first test, so no test counts it as its own
        await until(_zygote_running, "the kernel zygote is up", limit=60)
        yield agent, script


def _zygote_running() -> bool:
    return any("_kernel_zygote" in " ".join(child.cmdline()) for child in psutil.Process().children(recursive=True))


MAP = """
from freeact_sub_tasks import map_tasks
out = await map_tasks("Label row {}", range(5), agent_type="labeler")
print(len(out))
"""


def by_id(spans: list[ReadableSpan]) -> dict[int, ReadableSpan]:
    return {span.context.span_id: span for span in spans}


def ancestors(span: ReadableSpan, spans: dict[int, ReadableSpan]) -> list[ReadableSpan]:
    chain = []
    while span.parent is not None and span.parent.span_id in spans:
        span = spans[span.parent.span_id]
        chain.append(span)
    return chain


def run_of(span: ReadableSpan, spans: dict[int, ReadableSpan]) -> str:
    """The agent whose run holds `span` (its nearest `invoke_agent` ancestor)."""
    return next(a.attributes["freeact.agent_id"] for a in ancestors(span, spans) if a.name.startswith("invoke_agent"))


async def test_one_trace_with_every_child_under_the_call_that_started_it(shared) -> None:
    agent, script = shared
    SPANS.clear()
    script.reset(
        [Call("task", {"prompt": f"CHILD-a: {SECRET}", "subagent_type": "labeler"}, id="t-a"),
         Call("task", {"prompt": "CHILD-bg: later", "subagent_type": "labeler", "run_in_background": True},
              id="t-bg"),
         Call("execute_ipython_cell", {"code": MAP}, id="cell")],
        ["done"],
    )
    events = await drive(agent.stream(f"{PARENT}: {SECRET}"), limit=60)
    await until(lambda: not agent.subagents(), "the background child ends", limit=20)
    assert len(of(SubagentStarted, events)) >= 6  # the background child's start may come between turns
    await until(lambda: sum(s.name.startswith("invoke_agent") for s in SPANS.get_finished_spans()) == 8,
                "every run's span ends", limit=10)

    finished = list(SPANS.get_finished_spans())
    spans = by_id(finished)
    assert len({span.context.trace_id for span in finished}) == 1, "one trace for the run"
    roots = [span for span in finished if span.parent is None]
    assert [root.name for root in roots] == ["invoke_agent general"]
    assert roots[0].attributes["freeact.agent_id"] == agent.agent_id
    orphans = [span.name for span in finished if span.parent is not None and span.parent.span_id not in spans]
    assert not orphans, f"spans whose parent was never exported: {orphans}"

    runs = {span.attributes["freeact.agent_id"]: span for span in finished if span.name.startswith("invoke_agent")}
    calls = {span.attributes["gen_ai.tool.call.id"]: span for span in finished if span.name.startswith("execute_tool")}
    records = {child: runs[child] for child in runs if child != agent.agent_id}
    assert len(records) == 7  # a, the background one, five from the cell
    for child, run in records.items():
        parent = spans[run.parent.span_id]
        assert parent.name == "execute_tool task", (child, parent.name)
        assert run.attributes["freeact.parent_agent_id"] == agent.agent_id
        assert run.attributes["freeact.agent_type"] == "labeler"
    for call in ("t-a", "t-bg"):  # a foreground and a background `task` call: each holds its child's run
        assert [run.parent.span_id for run in records.values()].count(calls[call].context.span_id) == 1
    from_code = [run for run in records.values()
                 if spans[run.parent.span_id].attributes.get("freeact.source") == "code"]
    assert len(from_code) == 5
    assert all(spans[spans[run.parent.span_id].parent.span_id] is calls["cell"] for run in from_code)
    assert spans[calls["cell"].parent.span_id].name == "turn 1"

    # pydantic-ai's model request spans, under a turn of the agent that made them; their tokens are Usage's
    chats = [span for span in finished if span.name.startswith("chat ")]
    assert chats and all(spans[chat.parent.span_id].name.startswith("turn ") for chat in chats)
    tokens: dict[str, list[int]] = {}
    for chat in chats:
        mine = tokens.setdefault(run_of(chat, spans), [0, 0])
        mine[0] += chat.attributes["gen_ai.usage.input_tokens"]
        mine[1] += chat.attributes["gen_ai.usage.output_tokens"]
    usage = agent.usage
    assert tokens == {a: [usage.of(a).input_tokens, usage.of(a).output_tokens] for a in usage.by_agent}
    for agent_id, run in runs.items():
        assert run.attributes["freeact.usage.input_tokens"] == usage.of(agent_id).input_tokens
    # content is off by default: no prompt, no code on any span
    text = repr([dict(span.attributes or {}) for span in finished]
                + [[event.attributes for event in span.events] for span in finished])
    assert SECRET not in text and "map_tasks" not in text

    # metrics: tokens per agent type and model, children and their outcome, cells
    points = _points()
    assert points[("freeact.tokens", ("freeact.agent_type", "labeler"), ("gen_ai.token.type", "input"))] == sum(
        usage.of(a).input_tokens for a in records)
    assert points[("freeact.children.started", ("freeact.agent_type", "labeler"))] == 7
    assert points[("freeact.children.ended", ("freeact.agent_type", "labeler"), ("freeact.outcome", "done"))] == 7
    assert points[("freeact.cells", ("freeact.agent_type", "general"), ("freeact.status", "ok"))] == 1
    assert points[("freeact.kernel.spawn", ("freeact.kernel", "main"))] > 0  # the main agent's kernel, at its start


async def test_content_is_on_the_spans_only_when_asked(shared) -> None:
    agent, script = shared
    telemetry = agent.tree.telemetry
    assert telemetry is not None
    telemetry.content, telemetry._instrumentation = True, None  # as `telemetry_content=True` would have it
    try:
        SPANS.clear()
        script.reset([Call("execute_ipython_cell", {"code": "print(6 * 7)"}, id="c42")], ["42"])
        await drive(agent.stream(f"{PARENT}: {SECRET}"), limit=30)
    finally:
        telemetry.content, telemetry._instrumentation = False, None
    finished = SPANS.get_finished_spans()
    cell = next(span for span in finished if span.attributes.get("gen_ai.tool.call.id") == "c42")
    assert cell.attributes["freeact.code"] == "print(6 * 7)"
    assert cell.attributes["gen_ai.tool.call.result"].strip() == "42"
    run = next(span for span in finished if span.name.startswith("invoke_agent"))
    assert SECRET in run.attributes["freeact.prompt"]
    chat = next(span for span in finished if span.name.startswith("chat "))
    assert SECRET in str(chat.attributes.get("gen_ai.input.messages"))


def _points() -> dict[tuple[Any, ...], float]:
    """Each metric's data points, by name and sorted attributes (the freeact ones)."""
    found: dict[tuple[Any, ...], float] = {}
    data = READER.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    attributes = tuple(sorted((k, v) for k, v in (point.attributes or {}).items()
                                              if k in ("freeact.agent_type", "gen_ai.token.type", "freeact.outcome",
                                                       "freeact.status", "freeact.kernel")))
                    value = getattr(point, "value", getattr(point, "sum", 0))
                    key = (metric.name, *attributes)
                    found[key] = found.get(key, 0) + value
    return found




async def _probe(mode: str, **env: str) -> tuple[dict[str, Any], list[str]]:
    """`tests/telemetry_probe.py` in a fresh process: its report and its stderr lines."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.telemetry_probe", mode, cwd=ROOT, env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), 180)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode()
    return json.loads(out.decode().strip().splitlines()[-1]), err.decode().splitlines()


async def test_off_imports_no_sdk_and_starts_no_thread_and_a_down_endpoint_costs_one_line() -> None:
    with socket.socket() as free:  # a port nobody listens on: the endpoint is down
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    # off: no OTLP variable at all (it alone would turn telemetry on); on: `telemetry=True`, the endpoint down
    report, said = await _probe("off-then-on", OTEL_EXPORTER_OTLP_ENDPOINT="", OTEL_SDK_DISABLED="",
                                PROBE_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
    off, down = report["off"], report["on"]
    assert off["answer"] == ["It is 42."]
    assert off["sdk_imported"] is False and off["threads"] == []
    # the same run with telemetry on does import it and start its exporters (so the check above can fail)
    assert down["sdk_imported"] is True and "OtelBatchSpanRecordProcessor" in down["threads"]
    assert down["answer"] == ["It is 42."], "the run goes on without its exporter"
    warnings = [line for line in said if "telemetry" in line]
    assert warnings == [f"freeact-sub: telemetry could not reach http://127.0.0.1:{port}/v1/traces; the run goes on "
                        "without it (spans and metrics are dropped)"], said
    assert down["stop_seconds"] < 2 * FLUSH_SECONDS + 2, "stop() waits a bounded time for a down endpoint"
