"""OpenTelemetry: one tracer provider per service; trace context travels in every envelope.

Every entry carries the trace context in its headers (bus/framing.py) and each consumer
handles it in a span of that trace (bus/consumer.py), so a cycle is one trace hop by hop.
The envelope's ``trace`` field carries the same context where headers do not survive: a
message that waited in a thread's queue, or a cycle ended by the deadline sweeper.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import IO

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

from memoria_runtime.redaction import RedactingSpanExporter, span_with
from memoria_runtime.settings import TelemetrySettings

_EXPORT_DELAY_MS = 500  # short, so spans of a finished cycle show up while you look


def _one_line(span: ReadableSpan) -> str:
    try:
        return str(span.to_json(indent=None)) + "\n"
    except TypeError:
        # FastStream records a request's reply channel as bytes; JSON cannot hold bytes, and
        # one bad span would make the console exporter drop its whole batch.
        return str(_with_text_attributes(span).to_json(indent=None)) + "\n"


def _with_text_attributes(span: ReadableSpan) -> ReadableSpan:
    attributes = {
        key: value.decode(errors="replace") if isinstance(value, bytes) else value
        for key, value in (span.attributes or {}).items()
    }
    return span_with(span, attributes=attributes)


def _exporter(settings: TelemetrySettings) -> SpanExporter | None:
    """The exporter ``settings`` ask for, behind redaction: spans leave the process without
    credentials (redaction.py)."""
    exporter = _plain_exporter(settings)
    return RedactingSpanExporter(exporter) if exporter is not None else None


def _plain_exporter(settings: TelemetrySettings) -> SpanExporter | None:
    if settings.otel_exporter == "console":
        out: IO[str] = (
            open(settings.otel_console_path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
            if settings.otel_console_path
            else sys.stdout
        )
        return ConsoleSpanExporter(out=out, formatter=_one_line)
    if settings.otel_exporter == "otlp":
        endpoint = settings.otel_endpoint
        return OTLPSpanExporter(endpoint=f"{endpoint.rstrip('/')}/v1/traces" if endpoint else None)
    return None


def setup_tracing(service: str, settings: TelemetrySettings) -> TracerProvider:
    """Install the process-wide tracer provider (:func:`tracer_provider`)."""
    provider = tracer_provider(service, settings)
    trace.set_tracer_provider(provider)
    return provider


def tracer_provider(service: str, settings: TelemetrySettings) -> TracerProvider:
    """The tracer provider ``settings`` ask for.

    With no exporter, spans are not recorded (nothing would read them, and a recorded span
    costs several times the CPU of one that is only made, a few dozen spans a cycle) but
    still made: trace ids appear in logs, travel in every envelope and link a cycle's
    events. With one, every span is recorded, whatever the parent's sampled flag says: a
    service that exports, under one that does not, still shows its spans of the trace.
    """
    exporter = _exporter(settings)
    provider = TracerProvider(
        resource=Resource.create({"service.name": f"memoria-{service}"}),
        sampler=ALWAYS_ON if exporter is not None else ALWAYS_OFF,
    )
    if exporter is not None:
        provider.add_span_processor(
            BatchSpanProcessor(exporter, schedule_delay_millis=_EXPORT_DELAY_MS)
        )
    return provider


def current_trace_carrier() -> dict[str, str]:
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


@contextmanager
def attached_trace(carrier: Mapping[str, str]) -> Iterator[None]:
    """Make ``carrier``'s trace the current one, e.g. to publish a queued message in its own
    trace rather than in the trace of the cycle that happened to dequeue it."""
    token = otel_context.attach(propagate.extract(dict(carrier)))
    try:
        yield
    finally:
        otel_context.detach(token)
