"""Spans reach the console exporter as one JSON line each, even with bytes attributes; with
no exporter they are not recorded, and their trace still travels."""

from __future__ import annotations

import io
import json
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from memoria_runtime.settings import Settings
from memoria_runtime.telemetry import (
    _one_line,
    attached_trace,
    current_trace_carrier,
    tracer_provider,
)


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


def test_without_an_exporter_spans_are_not_recorded_and_their_trace_still_travels() -> None:
    tracer = tracer_provider("test", Settings.load(otel_exporter="none").telemetry).get_tracer(
        "test"
    )
    with tracer.start_as_current_span("origin") as origin:
        assert not origin.is_recording()
        assert origin.get_span_context().is_valid  # a trace id for the logs and the cycle
        carrier = current_trace_carrier()
    assert format(origin.get_span_context().trace_id, "032x") in carrier["traceparent"]
    with attached_trace(carrier), tracer.start_as_current_span("next hop") as hop:
        assert hop.get_span_context().trace_id == origin.get_span_context().trace_id


def test_an_exporting_service_records_its_spans_under_a_parent_that_does_not(
    tmp_path: Path,
) -> None:
    quiet = tracer_provider("quiet", Settings.load(otel_exporter="none").telemetry).get_tracer(
        "quiet"
    )
    with quiet.start_as_current_span("upstream"):
        carrier = current_trace_carrier()  # its sampled flag is off
    path = tmp_path / "spans.jsonl"
    settings = Settings.load(otel_exporter="console", otel_console_path=str(path))
    provider = tracer_provider("loud", settings.telemetry)
    with attached_trace(carrier), provider.get_tracer("loud").start_as_current_span("here") as s:
        assert s.is_recording()
    provider.shutdown()  # flushes the batch
    [line] = [json.loads(line) for line in path.read_text().splitlines()]
    assert line["name"] == "here"
    assert line["context"]["trace_id"] == "0x" + carrier["traceparent"].split("-")[1]
