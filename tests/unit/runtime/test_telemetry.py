"""Spans reach the console exporter as one JSON line each, even with bytes attributes."""

from __future__ import annotations

import io
import json

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from memoria_runtime.telemetry import _one_line, attached_trace, current_trace_carrier


def test_spans_with_bytes_attributes_are_exported() -> None:
    out = io.StringIO()
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=_one_line))
    )
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("reply", attributes={"channel": b"abc"}):
        pass
    with tracer.start_as_current_span("plain", attributes={"n": 1}):
        pass
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["name"] for line in lines] == ["reply", "plain"]
    assert lines[0]["attributes"]["channel"] == "abc"


def test_a_carrier_brings_its_trace_back() -> None:
    provider = TracerProvider()
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("origin") as origin:
        carrier = current_trace_carrier()
    assert "traceparent" in carrier
    with attached_trace(carrier), tracer.start_as_current_span("later") as later:
        assert later.get_span_context().trace_id == origin.get_span_context().trace_id
