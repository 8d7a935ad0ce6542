"""Whether telemetry is on, and opening it: the providers a program set, else the SDK's with OTLP exporters."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tracing import Telemetry

__all__ = ["MISSING_EXTRA", "open_telemetry", "wanted"]

MISSING_EXTRA = (
    "telemetry is on but the OpenTelemetry SDK is not installed: pip install 'freeact-sub[telemetry]' "
    "(or set up a tracer provider in your program before the agent starts)"
)


def wanted(telemetry: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Telemetry is on when asked (`AgentConfig.telemetry`) or with an OTLP endpoint in the environment, unless
    `OTEL_SDK_DISABLED=true`."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return bool(telemetry or endpoint)


def open_telemetry(
    telemetry: bool, *, content: bool = False, environ: Mapping[str, str] | None = None
) -> Telemetry | None:
    """The tree's `Telemetry` (`content`: prompts, code and outputs on the spans), or None when it is off.

    Raises `ConfigError` when it is on, the program set no tracer provider and the SDK is not installed.
    """
    if not wanted(telemetry, environ):
        return None
    from opentelemetry import metrics, trace

    from .tracing import Telemetry

    tracer_provider, meter_provider = trace.get_tracer_provider(), metrics.get_meter_provider()
    owned = None
    if _is_default(tracer_provider):  # nobody set one up: ours, exporting over OTLP
        from ..errors import ConfigError

        try:
            from .providers import OwnProviders
        except ImportError as exc:
            raise ConfigError(MISSING_EXTRA) from exc
        owned = OwnProviders(environ)
        tracer_provider = owned.tracer_provider
        if _is_default(meter_provider):
            meter_provider = owned.meter_provider()
    return Telemetry(tracer_provider, meter_provider, content=content, owned=owned)


def _is_default(provider: object) -> bool:
    """Whether `provider` is the API's stand-in (a proxy or no-op), i.e. the program set none."""
    return type(provider).__name__.startswith(("Proxy", "NoOp", "_Proxy"))
