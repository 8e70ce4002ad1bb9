"""Logging set up once per service: one line per record, with the current trace id."""

from __future__ import annotations

import logging
import sys

import faststream  # noqa: F401  (its import installs the handler taken off below: first)
from opentelemetry import trace

from memoria_runtime.redaction import install_log_redaction

_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(trace_id)s] %(message)s"
# FastStream's app logger only says "starting… started, press CTRL+C… shutting down".
_NOISY_LOGGERS = ("httpx", "httpcore", "uvicorn.access", "google_genai.models", "faststream")
_ADOPTED_LOGGERS = ("faststream", "uvicorn", "uvicorn.error", "uvicorn.access")


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
    # FastStream gives its app logger a handler of its own (another time format, color codes
    # even into a pipe) and keeps its records from ours, and uvicorn does the same wherever its
    # default logging config ran once in the process: send them through this one format.
    # Levels too: the root's level is the one that counts for them.
    for name in _ADOPTED_LOGGERS:
        adopted = logging.getLogger(name)
        adopted.handlers.clear()
        adopted.propagate = True
        adopted.setLevel(logging.NOTSET)
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
