"""The SDK's tracer and meter providers with OTLP/HTTP exporters, for a program that set up none.

Imported only when telemetry is on (the `[telemetry]` extra). Export happens in the SDK's
background threads; an endpoint that cannot be reached costs one warning line on stderr and the
spans it would have taken, never a wait in the run. `OTEL_*` variables (endpoint, headers,
service name, resource attributes, timeouts) are read by the SDK as usual.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

__all__ = ["OwnProviders"]

_EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp.proto.http", "opentelemetry.sdk.metrics._internal.export")
FLUSH_SECONDS = 2.0
"""The longest the agent's `stop()` waits for the last spans to leave (in a thread: the loop goes on)."""


class _Warning:
    """Says once, on stderr, that the endpoint could not be reached; the exporters' own log lines are quieted."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._said = threading.Event()

    def failed(self) -> None:
        if not self._said.is_set():
            self._said.set()
            print(f"freeact-sub: telemetry could not reach {self.endpoint}; the run goes on without it "
                  "(spans and metrics are dropped)", file=sys.stderr)


class _OneWarningSpans(SpanExporter):
    """The OTLP span exporter, turning failures into the one warning."""

    def __init__(self, inner: OTLPSpanExporter, warning: _Warning) -> None:
        self._inner, self._warning = inner, warning

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._inner.export(spans)
        except Exception:  # a transport fault the exporter did not catch: the run must not see it
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self._warning.failed()
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class OwnProviders:
    """The tracer provider (and, when asked, the meter provider) the agent owns and shuts down with its tree."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        for name in _EXPORTER_LOGGERS:  # their retries and tracebacks would bury the one line we print
            logging.getLogger(name).setLevel(logging.CRITICAL)
        base = (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318").rstrip("/")
        traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or f"{base}/v1/traces"
        self._warning = _Warning(traces)
        name = env.get("OTEL_SERVICE_NAME") or "freeact-sub"
        self.resource = Resource.create({SERVICE_NAME: name})
        # no exit hook of the SDK's own: an endpoint that is down would hold the process's exit for its retries
        self.tracer_provider = TracerProvider(resource=self.resource, shutdown_on_exit=False)
        self._span_exporter = OTLPSpanExporter(endpoint=traces)
        exporter = _OneWarningSpans(self._span_exporter, self._warning)
        self.tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        self._metrics_endpoint = env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or f"{base}/v1/metrics"
        self._meter_provider: MeterProvider | None = None
        self._metric_exporter: OTLPMetricExporter | None = None

    def meter_provider(self) -> MeterProvider:
        """A meter provider exporting over OTLP every minute (and at shutdown)."""
        if self._meter_provider is None:
            self._metric_exporter = OTLPMetricExporter(endpoint=self._metrics_endpoint)
            reader = PeriodicExportingMetricReader(self._metric_exporter)
            self._meter_provider = MeterProvider(
                resource=self.resource, metric_readers=[reader], shutdown_on_exit=False)
        return self._meter_provider

    def shutdown(self) -> None:
        """Send what is left and stop the export threads: at most `FLUSH_SECONDS`, then the exporters are told to
        stop retrying (an endpoint that is down loses the rest, and nobody waits for it)."""
        closing = threading.Thread(target=self._shutdown, name="freeact-telemetry-shutdown", daemon=True)
        closing.start()
        closing.join(FLUSH_SECONDS)
        if closing.is_alive():
            self._span_exporter.shutdown()  # ends a retry's wait at once
            if self._metric_exporter is not None:
                self._metric_exporter.shutdown()
            closing.join(FLUSH_SECONDS)

    def _shutdown(self) -> None:
        self.tracer_provider.shutdown()
        if self._meter_provider is not None:
            self._meter_provider.shutdown(timeout_millis=int(FLUSH_SECONDS * 1000))

    def __repr__(self) -> str:
        return f"OwnProviders(traces={self._warning.endpoint!r})"


