"""The instruments of a tree's metrics: tokens and cost by agent type and model, cells, approvals, children,
kernel spawn time. Attributes carry `freeact.agent_type` and `gen_ai.request.model` where they apply."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter

__all__ = ["Meters"]


class Meters:
    """One tree's counters and histograms, made once from its meter."""

    def __init__(self, meter: Meter) -> None:
        self.tokens = meter.create_counter(
            "freeact.tokens", unit="{token}", description="Tokens of model responses, by agent type, model and kind")
        self.cost = meter.create_counter("freeact.cost", unit="USD", description="Priced cost of model responses")
        self.cells = meter.create_counter("freeact.cells", unit="{cell}", description="Cells run, by how they ended")
        self.approvals = meter.create_counter(
            "freeact.approvals", unit="{approval}", description="Tool calls decided, by who decided and how")
        self.approval_wait = meter.create_histogram(
            "freeact.approval.wait", unit="s", description="How long a person took to decide a tool call")
        self.children_started = meter.create_counter(
            "freeact.children.started", unit="{agent}", description="Subagents started, by type and model")
        self.children_ended = meter.create_counter(
            "freeact.children.ended", unit="{agent}", description="Subagents' runs ended, by outcome")
        self.kernel_spawn = meter.create_histogram(
            "freeact.kernel.spawn", unit="s", description="Seconds until an agent's kernel was ready")
