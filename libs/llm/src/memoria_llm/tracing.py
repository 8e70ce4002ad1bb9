"""Spans of remote LLM calls, named and attributed the same way by every provider
(OpenTelemetry's ``gen_ai.*`` conventions plus the caller's task)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.trace import Span

from memoria_llm.port import LLMRequest


class LLMTracer:
    def __init__(self, system: str, tracer_provider: trace.TracerProvider | None) -> None:
        self._system = system
        self._tracer = trace.get_tracer("memoria.llm", tracer_provider=tracer_provider)

    def attributes(self, model: str, request: LLMRequest | None) -> dict[str, str]:
        attributes = {"gen_ai.system": self._system, "gen_ai.request.model": model}
        if request is not None:
            attributes["memoria.llm.task"] = request.task
        return attributes

    @contextmanager
    def span(self, name: str, model: str, request: LLMRequest | None) -> Iterator[Span]:
        """The current span for a call that completes inside it."""
        with self._tracer.start_as_current_span(
            name, attributes=self.attributes(model, request)
        ) as span:
            yield span

    def start_span(self, name: str, model: str, request: LLMRequest | None) -> Span:
        """A span that is not made current, for a stream: the consumer runs between the
        stream's yields, in its own context. The caller ends it."""
        return self._tracer.start_span(name, attributes=self.attributes(model, request))
