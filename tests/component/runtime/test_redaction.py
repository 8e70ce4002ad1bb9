"""No credential survives a log record or an exported span: socket queries, Authorization
headers, bearer subprotocols, JSON fields, URL passwords and bare JWTs are redacted, and
what is not a credential is left as it was."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from memoria_runtime.auth import TokenIssuer
from memoria_runtime.logs import configure_logging
from memoria_runtime.redaction import REDACTED, RedactingSpanExporter, redact
from memoria_runtime.telemetry import _one_line

TOKEN = TokenIssuer("unit-test-secret-of-thirty-two-bytes", 3600).issue("ana")
OPAQUE = "s3cr3t-Opaque_value"  # not a JWT: only its place gives it away


@pytest.mark.parametrize(
    "text",
    [
        f'127.0.0.1:5000 - "WebSocket /ws?token={TOKEN}" [accepted]',
        f'127.0.0.1:5000 - "WebSocket /ws?since=1-0&token={OPAQUE}" 403',
        f"GET /api/memories?access_token={OPAQUE}&q=x HTTP/1.1",
        f"token={OPAQUE}&since=1-0",  # url.query on its own
        f"GET /x?api_key={OPAQUE}",
        f"Authorization: Bearer {OPAQUE}",
        f"{{'authorization': 'Bearer {OPAQUE}'}}",
        f"[(b'authorization', b'Bearer {OPAQUE}')]",
        f"Sec-WebSocket-Protocol: memoria.v1, bearer.{OPAQUE}",
        f'{{"type": "auth", "token": "{OPAQUE}"}}',
        f"connecting to redis://default:{OPAQUE}@redis:6379/0",
        f"the user pasted {TOKEN} into a message",
    ],
)
def test_credentials_are_redacted(text: str) -> None:
    clean = redact(text)
    assert OPAQUE not in clean
    assert TOKEN not in clean
    assert REDACTED in clean


@pytest.mark.parametrize(
    "text",
    [
        '127.0.0.1:5000 - "WebSocket /ws?since=1732350000901-0" [accepted]',
        "GET /api/memories/search?q=my+cat&limit=5 HTTP/1.1",
        "starting as consumer gateway-1 on redis://127.0.0.1:6379/0",
        "a bearer token is required",
        "thread_id=main session_id=abc",
        "cycle cyc_01JABC ended: done (2 actions, 180 input tokens)",
    ],
)
def test_everything_else_is_kept(text: str) -> None:
    assert redact(text) == text


def test_the_redacted_query_keeps_its_other_parameters() -> None:
    assert redact(f"/ws?token={TOKEN}&since=1-0") == f"/ws?token={REDACTED}&since=1-0"


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """Logging set up as a service does it, written into a buffer."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    configure_logging("INFO")
    out = io.StringIO()
    for handler in root.handlers:
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(out)
    try:
        yield out
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])


def test_uvicorn_socket_lines_are_redacted(log_output: io.StringIO) -> None:
    # What uvicorn's WebSocket protocol logs for every socket it accepts.
    logging.getLogger("uvicorn.error").info(
        '%s - "WebSocket %s" [accepted]', "127.0.0.1:5000", f"/ws?token={TOKEN}"
    )
    line = log_output.getvalue()
    assert TOKEN not in line
    assert f'"WebSocket /ws?token={REDACTED}" [accepted]' in line


def test_a_logger_with_its_own_handler_is_redacted_too(log_output: io.StringIO) -> None:
    own = io.StringIO()
    logger = logging.getLogger("some.library")
    handler = logging.StreamHandler(own)
    logger.addHandler(handler)
    try:
        logger.warning("request to %s failed", f"https://api.example/v1?key={OPAQUE}")
    finally:
        logger.removeHandler(handler)
    assert OPAQUE not in own.getvalue()
    assert OPAQUE not in log_output.getvalue()
    assert "https://api.example/v1?key=" in own.getvalue()


def test_tracebacks_are_redacted(log_output: io.StringIO) -> None:
    try:
        raise ValueError(f"could not open /ws?token={TOKEN}")
    except ValueError:
        logging.getLogger("uvicorn.error").exception("Exception in ASGI application")
    text = log_output.getvalue()
    assert "ValueError: could not open /ws?token=" in text
    assert TOKEN not in text


def test_clean_records_keep_their_arguments(log_output: io.StringIO) -> None:
    record = logging.getLogger("memoria.test").makeRecord(
        "memoria.test", logging.INFO, __file__, 1, "saved %d memories", (3,), None
    )
    assert record.args == (3,)
    assert record.getMessage() == "saved 3 memories"


def test_exported_spans_are_redacted() -> None:
    out = io.StringIO()
    provider = TracerProvider()
    exporter = RedactingSpanExporter(ConsoleSpanExporter(out=out, formatter=_one_line))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span(
        "GET /ws",
        attributes={
            "http.url": f"http://127.0.0.1:8000/ws?token={TOKEN}",
            "http.target": f"/ws?token={TOKEN}",
            "url.query": f"token={TOKEN}&since=1-0",
            "http.request.header.authorization": [f"Bearer {OPAQUE}"],
            "messaging.reply_to": b"memoria:replies",
            "http.status_code": 101,
        },
    ) as span:
        span.record_exception(RuntimeError(f"refused /ws?token={TOKEN}"))
    [line] = out.getvalue().splitlines()
    assert TOKEN not in line
    assert OPAQUE not in line
    attributes = json.loads(line)["attributes"]
    assert attributes["url.query"] == f"token={REDACTED}&since=1-0"
    assert attributes["messaging.reply_to"] == "memoria:replies"
    assert attributes["http.status_code"] == 101


def test_an_exception_that_ends_the_process_is_printed_redacted() -> None:
    script = (
        "from memoria_runtime.logs import configure_logging\n"
        "configure_logging('INFO')\n"
        f"raise RuntimeError('cannot reach redis://default:{OPAQUE}@broker:6379/0')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert f"RuntimeError: cannot reach redis://default:{REDACTED}@broker" in done.stderr
    assert OPAQUE not in done.stderr
