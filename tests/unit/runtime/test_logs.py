"""A service's logging: one format for every record, FastStream's included."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator

import pytest

from memoria_runtime import logs

# memoria_runtime.logs: "15:58:51 WARNING faststream [-] text"
OUR_FORMAT = re.compile(r"^\d\d:\d\d:\d\d [A-Z]+ +\S+ \[(?:[0-9a-f]{16}|-)\] .*$")


@pytest.fixture
def configured() -> Iterator[io.StringIO]:
    """configure_logging("INFO"), its handler writing into the returned buffer."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    logs.configure_logging("INFO")
    out = io.StringIO()
    for handler in root.handlers:
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(out)
    yield out
    root.handlers[:], level = saved
    root.setLevel(level)


def test_faststream_records_come_out_in_our_format_without_color_codes(
    configured: io.StringIO,
) -> None:
    faststream = logging.getLogger("faststream")
    faststream.info("FastStream app started successfully! To exit, press CTRL+C")  # noise
    faststream.warning("a subscriber is slow")

    lines = configured.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert OUR_FORMAT.match(lines[0]) and lines[0].endswith("a subscriber is slow")
    assert "\x1b" not in lines[0]
