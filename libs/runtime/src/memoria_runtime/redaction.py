"""Credentials never leave a process in a log line, a traceback or a span.

Session tokens travel in a socket's query (``/ws?token=…``), an ``Authorization`` header or a
``bearer.<token>`` subprotocol, and broker/database URLs may carry a password. Servers and
libraries print URLs and exceptions freely (uvicorn logs every socket's path and query), so
rather than guarding each call site, every log record and every exported span is rewritten
here, once per process, before anything writes it out.
"""

from __future__ import annotations

import logging
import re
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Status
from opentelemetry.util.types import AttributeValue

REDACTED: Final = "[REDACTED]"

# Query parameters (and form fields) whose value is a credential, whatever the route.
_SECRET_NAMES: Final = (
    r"[A-Za-z0-9_.-]*(?:token|secret|password|passwd|pwd|api[_-]?key|apikey|key|auth"
    r"|authorization|jwt|signature|sig|credential|credentials|session)"
)
_PATTERNS: Final[Sequence[tuple[re.Pattern[str], str]]] = (
    # ?token=… / &access_token=… / ;key=… : the value up to the next separator.
    (re.compile(rf"(?i)((?:^|[?&;\s\"'(]){_SECRET_NAMES}=)[^&;#\s\"'<>]+"), rf"\1{REDACTED}"),
    # Authorization: Bearer … / Basic … (a header printed as text or as a repr'd pair).
    (
        re.compile(
            r"(?i)(authorization[\"']?\s*[:=,]\s*[\"']?(?:bearer|basic|token)?\s*)[^\s\"',]+"
        ),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\1{REDACTED}"),
    # The subprotocol that carries a socket's token: Sec-WebSocket-Protocol: bearer.<token>.
    (re.compile(r"(?i)\b(bearer\.)[A-Za-z0-9._~+/=-]{8,}"), rf"\1{REDACTED}"),
    # "token": "…" in JSON text (a frame or a body quoted in an error).
    (re.compile(rf"(?i)([\"']{_SECRET_NAMES}[\"']\s*:\s*[\"'])[^\"']*"), rf"\1{REDACTED}"),
    # scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@/\s]+@"), rf"\1{REDACTED}@"),
    # A JWT wherever it stands (a token pasted into a message, a frame, an exception).
    (re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), REDACTED),
)


def redact(text: str) -> str:
    """``text`` with every credential it holds replaced by ``[REDACTED]``."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


# -- logs ---------------------------------------------------------------------------------

_RecordFactory = Callable[..., logging.LogRecord]
_installed: list[_RecordFactory] = []


def _redacted_record(record: logging.LogRecord) -> logging.LogRecord:
    try:
        message = record.getMessage()
    except Exception:  # a malformed record is logging's to report (when it formats), not ours
        return record
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and record.exc_info[0] is not None:
        text = logging.Formatter().formatException(record.exc_info)
        clean = redact(text)
        if clean != text:
            record.exc_text = clean  # formatters use it instead of formatting exc_info again
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    return record


def _print_redacted_exception(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    sys.stderr.write(redact("".join(traceback.format_exception(kind, value, tb))))


def install_log_redaction() -> None:
    """Redact every log record this process makes, on every logger and every handler
    (uvicorn's, FastStream's, a library's own), as it is made; and the traceback of an
    exception that ends the process. Idempotent."""
    if _installed:
        return
    make = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return _redacted_record(make(*args, **kwargs))

    _installed.append(make)
    logging.setLogRecordFactory(factory)
    sys.excepthook = _print_redacted_exception


# -- spans --------------------------------------------------------------------------------


def _clean_value(value: AttributeValue) -> AttributeValue:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, bytes):
        # FastStream records a reply channel as bytes; JSON exporters cannot hold bytes.
        return redact(value.decode(errors="replace"))
    if isinstance(value, tuple | list) and all(isinstance(item, str) for item in value):
        return [redact(str(item)) for item in value]
    return value


def _clean(attributes: Mapping[str, AttributeValue] | None) -> dict[str, AttributeValue]:
    return {key: _clean_value(value) for key, value in (attributes or {}).items()}


def redacted_span(span: ReadableSpan) -> ReadableSpan:
    """``span`` with its attributes (``http.url``, ``url.query``, …), its events' (an
    exception's message and stack trace) and its status text redacted."""
    status = span.status
    if status.description:
        status = Status(status.status_code, redact(status.description))
    return span_with(
        span,
        attributes=_clean(span.attributes),
        events=[
            Event(event.name, _clean(event.attributes), event.timestamp) for event in span.events
        ],
        status=status,
    )


def span_with(
    span: ReadableSpan,
    *,
    attributes: Mapping[str, AttributeValue],
    events: Sequence[Event] | None = None,
    status: Status | None = None,
) -> ReadableSpan:
    """A copy of the finished ``span`` with other attributes (and events, status)."""
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=span.events if events is None else events,
        links=span.links,
        kind=span.kind,
        status=span.status if status is None else status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class RedactingSpanExporter(SpanExporter):
    """Hands ``inner`` every span redacted (:func:`redacted_span`)."""

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._inner.export([redacted_span(span) for span in spans])

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)
