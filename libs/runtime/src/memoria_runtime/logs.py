"""Logging set up once per service: one line per record, with the current trace id."""

from __future__ import annotations

import logging
import sys

from opentelemetry import trace

from memoria_runtime.redaction import install_log_redaction

_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(trace_id)s] %(message)s"
_NOISY_LOGGERS = ("httpx", "httpcore", "uvicorn.access", "google_genai.models")


class _TraceIdFilter(logging.Filter):
    """Adds ``trace_id`` so a log line can be found next to its cycle's spans."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = trace.get_current_span().get_span_context()
        record.trace_id = format(context.trace_id, "032x")[:16] if context.is_valid else "-"
        return True


def configure_logging(level: str) -> None:
    install_log_redaction()  # before any record: uvicorn logs each socket's query (tokens)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
    handler.addFilter(_TraceIdFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
