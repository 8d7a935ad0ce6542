"""`Telemetry`: the spans of one agent tree, opened by the agents' parts and fed with their events.

Only the OpenTelemetry API is used here; the providers come from the program or `providers.py`.
Span names and attributes follow the GenAI semantic conventions where they have a word
(`invoke_agent`, `execute_tool`, `gen_ai.agent.id`, `gen_ai.tool.call.id`); what they have none for
is ours (`freeact.*`). Content (code, arguments, outputs, messages) is recorded only with `content`.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from ..events import (
    AgentEvent,
    ApprovalRequest,
    CodeExecutionOutput,
    ContextCompacted,
    HookFailed,
    ModelRetry,
    ModelUsage,
    RunCancelled,
    ToolOutput,
)
from .metrics import Meters

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from ..usage import Usage
    from .providers import OwnProviders

__all__ = ["Telemetry"]

_CONTENT_LIMIT = 16_000
"""The most characters of one content attribute (code, output, arguments)."""


class Telemetry:
    """The tracer and meters of one tree, and the spans open in it (runs, tool calls) by agent and call id."""

    def __init__(
        self, tracer_provider: TracerProvider, meter_provider: MeterProvider, *, content: bool = False,
        owned: OwnProviders | None = None,
    ) -> None:
        package = "freeact_sub"
        self.content = content
        """Whether prompts, code and outputs go on the spans."""
        self._tracer_provider, self._meter_provider = tracer_provider, meter_provider
        self.tracer = tracer_provider.get_tracer(package)
        self.meters = Meters(meter_provider.get_meter(package))
        self._owned = owned
        self._runs: dict[str, Span] = {}
        self._kinds: dict[str, dict[str, str]] = {}
        self._tools: dict[tuple[str, str], Span] = {}
        self._from_code: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._asked: dict[tuple[str, str], ApprovalRequest] = {}
        self._instrumentation: InstrumentationSettings | None = None

    # -- what the parts open ---------------------------------------------------------------

    def instrumentation(self) -> InstrumentationSettings:
        """pydantic-ai's instrumentation for model requests (its `chat <model>` spans), on our providers."""
        if self._instrumentation is None:
            from pydantic_ai.models.instrumented import InstrumentationSettings

            self._instrumentation = InstrumentationSettings(
                tracer_provider=self._tracer_provider, meter_provider=self._meter_provider,
                include_content=self.content, include_binary_content=False,
                # every request's full tool definitions again, serialized: large, the same each time, and slow
                include_model_request_parameters=False,
            )
        return self._instrumentation

    def start_run(
        self, agent_id: str, *, agent_type: str, model: str, parent_id: str | None, tool_call_id: str | None,
        session_id: str | None, prompt: str,
    ) -> otel_context.Context:
        """Open the span of one run of `agent_id`; the context its turn runs in (that span current).

        A child's run goes under the span of the call that started it: its parent's `task` call, or
        the cell whose code started it. A main agent's run goes under whatever span is current.
        """
        parent = None
        if parent_id is not None and tool_call_id:
            parent = self._tools.get((parent_id, tool_call_id)) or self._tools.get(
                (parent_id, tool_call_id.split("/")[0]))
        here = trace.set_span_in_context(parent) if parent is not None else otel_context.get_current()
        kind = {"freeact.agent_type": agent_type, "gen_ai.request.model": model}
        self._kinds[agent_id] = kind
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent_type, "gen_ai.agent.id": agent_id,
            "freeact.agent_id": agent_id, "freeact.parent_agent_id": parent_id or "", **kind,
        }
        if session_id:
            attributes["session.id"] = attributes["freeact.session_id"] = session_id
        if self.content:
            attributes["freeact.prompt"] = prompt[:_CONTENT_LIMIT]
        span = self.tracer.start_span(f"invoke_agent {agent_type}", context=here, attributes=attributes)
        self._runs[agent_id] = span
        if parent_id is not None:
            self.meters.children_started.add(1, kind)
        return trace.set_span_in_context(span, here)

    def end_run(self, agent_id: str, *, outcome: str, usage: Usage, is_child: bool) -> None:
        """Close `agent_id`'s run span with its outcome and the tokens and cost of this run."""
        for key in [key for key in self._asked if key[0] == agent_id]:  # asked outside any call's span
            del self._asked[key]
        span = self._runs.pop(agent_id, None)
        if span is None:
            return
        span.set_attributes(_usage_attributes(usage))
        span.set_attribute("freeact.outcome", outcome)
        if outcome == "failed":
            span.set_status(Status(StatusCode.ERROR))
        span.end()
        if is_child:
            self.meters.children_ended.add(1, {**self._kinds.get(agent_id, {}), "freeact.outcome": outcome})

    @contextlib.contextmanager
    def turn(self, agent_id: str, number: int) -> Iterator[None]:
        """The span of one model round and its tool calls, current while it runs."""
        attributes: dict[str, Any] = {"freeact.agent_id": agent_id, "freeact.turn": number}
        attributes.update(self._kinds.get(agent_id, {}))
        with self.tracer.start_as_current_span(f"turn {number}", attributes=attributes):
            yield

    @contextlib.contextmanager
    def tool_call(self, agent_id: str, tool_call_id: str, tool_name: str, arguments: dict[str, Any]) -> Iterator[None]:
        """The span of one tool call of the model (its approval, its run, a child it starts), current while it runs."""
        key = (agent_id, tool_call_id)
        with self.tracer.start_as_current_span(
            f"execute_tool {tool_name}", attributes=self._tool_attributes(agent_id, tool_call_id, tool_name, arguments),
        ) as span:
            self._tools[key] = span
            try:
                yield
            finally:
                self._tools.pop(key, None)
                self._decided(key, span)
                for inner in self._from_code.pop(key, []):  # calls from the cell's code that never answered
                    self._end_code_call(inner, None)

    def kernel_spawned(self, seconds: float, *, how: str, sandbox: str) -> None:
        """A kernel became ready for an agent (`how`: a `main` agent's or a `child`'s) `seconds` after it was asked."""
        self.meters.kernel_spawn.record(seconds, {"freeact.kernel": how, "freeact.sandbox": sandbox})

    # -- what the events say ---------------------------------------------------------------

    def observe(self, event: AgentEvent) -> None:
        """Note one event of the agent that produced it (each event once): span events, attributes, metrics."""
        agent_id, kind = event.agent_id, self._kinds.get(event.agent_id, {})
        match event:
            case ModelUsage():
                attributes = {**kind, "gen_ai.response.model": event.model_name}
                self.meters.tokens.add(event.input_tokens, {**attributes, "gen_ai.token.type": "input"})
                self.meters.tokens.add(event.output_tokens, {**attributes, "gen_ai.token.type": "output"})
                if event.cost is not None:
                    self.meters.cost.add(float(event.cost), attributes)
            case ApprovalRequest():
                key = (agent_id, event.tool_call_id)
                self._asked[key] = event
                if event.source == "code" and event.cell_call_id is not None:
                    self._start_code_call(event)
            case ToolOutput(source="code"):
                self._end_code_call((agent_id, event.tool_call_id), event)
            case CodeExecutionOutput():
                self.meters.cells.add(1, {**kind, "freeact.status": event.status})
                span = self._tools.get((agent_id, event.tool_call_id))
                if span is not None:
                    span.set_attribute("freeact.cell.status", event.status)
                    if self.content:
                        span.set_attribute("gen_ai.tool.call.result", event.content[:_CONTENT_LIMIT])
                    if event.status != "ok":
                        span.set_status(Status(StatusCode.ERROR, event.status))
            case ToolOutput():
                span = self._tools.get((agent_id, event.tool_call_id))
                if span is not None:
                    if self.content:
                        span.set_attribute("gen_ai.tool.call.result", event.content[:_CONTENT_LIMIT])
                    if event.is_error:
                        span.set_status(Status(StatusCode.ERROR))
            case ModelRetry():
                retry = {"freeact.attempt": event.attempt, "freeact.wait": event.wait, "freeact.reason": event.reason}
                self._event(agent_id, "freeact.model_retry", retry)
            case ContextCompacted():
                self._event(agent_id, "freeact.compaction", {"freeact.trigger": event.trigger,
                                                             "freeact.tokens_before": event.tokens_before,
                                                             "freeact.tokens_after": event.tokens_after})
            case HookFailed():
                self._event(agent_id, "freeact.hook_failed", {"freeact.hook": event.hook,
                                                              "freeact.hook_event": event.hook_event_name})
            case RunCancelled():
                self._event(agent_id, "freeact.run_cancelled", {"freeact.reason": event.reason})
            case _:
                pass

    def close(self) -> None:
        """End what is still open and, for providers of our own, send the rest and stop their threads."""
        for span in [*self._tools.values(), *self._runs.values()]:
            span.end()
        self._tools.clear()
        self._runs.clear()
        if self._owned is not None:
            self._owned.shutdown()

    # -- helpers ---------------------------------------------------------------------------

    def _tool_attributes(
        self, agent_id: str, call_id: str, tool_name: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool_name, "gen_ai.tool.call.id": call_id,
            "freeact.agent_id": agent_id, **self._kinds.get(agent_id, {}),
        }
        if self.content:
            code = arguments.get("code") if tool_name == "execute_ipython_cell" else None
            if isinstance(code, str):
                attributes["freeact.code"] = code[:_CONTENT_LIMIT]
            else:
                attributes["gen_ai.tool.call.arguments"] = json.dumps(arguments, default=str)[:_CONTENT_LIMIT]
        return attributes

    def _start_code_call(self, event: ApprovalRequest) -> None:
        """A tool call a cell's code made (an MCP tool, a child): a span under the cell, until its output."""
        agent_id, cell = event.agent_id, event.cell_call_id or ""
        parent = self._tools.get((agent_id, cell))
        key = (agent_id, event.tool_call_id)
        if parent is None or key in self._tools:
            return
        attributes = self._tool_attributes(agent_id, event.tool_call_id, event.tool_name, event.tool_args)
        attributes["freeact.source"] = "code"
        span = self.tracer.start_span(f"execute_tool {event.tool_name}", context=trace.set_span_in_context(parent),
                                      attributes=attributes)
        self._tools[key] = span
        self._from_code.setdefault((agent_id, cell), []).append(key)

    def _end_code_call(self, key: tuple[str, str], event: ToolOutput | None) -> None:
        span = self._tools.pop(key, None)
        if span is None:
            return
        if event is not None:
            if event.is_error:
                span.set_status(Status(StatusCode.ERROR))
            if self.content:
                span.set_attribute("gen_ai.tool.call.result", event.content[:_CONTENT_LIMIT])
        self._decided(key, span)
        span.end()

    def _decided(self, key: tuple[str, str], span: Span) -> None:
        """Put the call's approval on its span (who decided, how long it took) and count it."""
        asked = self._asked.pop(key, None)
        if asked is None:
            return
        by = ("hook" if asked.hook else "rule" if asked.rule else "standing decision" if asked.auto_approved
              else "person")
        decision = asked.decision
        waited = (asked.decided_at - asked.at) if asked.decided_at is not None else time.time() - asked.at
        outcome = "approved" if decision else "rejected" if decision is False else "undecided"
        span.add_event("freeact.approval", {"freeact.decided_by": by, "freeact.decision": outcome,
                                            "freeact.wait": max(waited, 0.0)})
        attributes = {**self._kinds.get(key[0], {}), "freeact.decided_by": by, "freeact.decision": outcome}
        self.meters.approvals.add(1, attributes)
        if by == "person":
            self.meters.approval_wait.record(max(waited, 0.0), attributes)

    def _event(self, agent_id: str, name: str, attributes: dict[str, Any]) -> None:
        span = self._runs.get(agent_id)
        if span is not None:
            span.add_event(name, attributes)


def _usage_attributes(usage: Usage) -> dict[str, Any]:
    """A run's tokens and cost, as span attributes (`gen_ai.usage.*` is left to the model request spans)."""
    attributes: dict[str, Any] = {
        "freeact.usage.requests": usage.requests, "freeact.usage.input_tokens": usage.input_tokens,
        "freeact.usage.output_tokens": usage.output_tokens,
    }
    if usage.cost is not None:
        attributes["freeact.usage.cost_usd"] = float(usage.cost)
    return attributes
