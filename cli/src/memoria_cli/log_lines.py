"""Reading a child's output line by line into the text and level :mod:`memoria_cli.console`
prints: its own time stamp, level word and color codes taken off, so that every line of
`memoria run` has one format whichever process wrote it."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class LogLine:
    """``level`` None: the line carries none (a traceback line, a print); it takes the level
    of the line before it from the same process."""

    text: str
    level: int | None = None


# Reads one line of a child's output (escape codes already removed); None drops it.
LineReader = Callable[[str], LogLine | None]

# CSI sequences (colors, cursor moves), OSC sequences (titles, links), lone escapes; and the
# other control characters a terminal would act on.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_LEVELS = "DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL"
# What Python's logging prints with a time stamp first, in the formats in use here:
# memoria_runtime.logs ("15:58:51 INFO    memoria.decision [-] text"), FastStream's and
# logging's defaults ("2026-11-27 15:58:51,865 INFO     - text").
_PYTHON = re.compile(
    r"^(?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d(?:[.,]\d+)?\s+"
    rf"(?P<level>{_LEVELS})\s+(?:-\s+)?(?P<rest>.*)$"
)
# memoria_runtime.logs: logger name and trace id (16 hex digits, or "-" outside a trace).
_OURS = re.compile(r"^(?P<logger>[\w.\-]+) \[(?P<trace>[0-9a-f]{16}|-)\] (?P<text>.*)$")


def plain(text: str) -> str:
    """``text`` without terminal escape sequences or control characters (tabs kept)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def level_number(word: str) -> int:
    return {"WARN": logging.WARNING, "FATAL": logging.CRITICAL}.get(
        word, logging.getLevelNamesMapping().get(word, logging.INFO)
    )


def python_line(text: str) -> LogLine | None:
    """A line of one of our Python processes: its logging's time and level taken off (the
    logger name too, which only repeats the service; the trace id stays when there is one).
    Anything else is kept as it is, without a level. Blank lines are dropped."""
    if not text.strip():
        return None
    found = _PYTHON.match(text)
    if found is None:
        return LogLine(text.rstrip())
    rest = found["rest"]
    ours = _OURS.match(rest)
    if ours is not None:
        trace = ours["trace"]
        rest = ours["text"] if trace == "-" else f"[{trace}] {ours['text']}"
    return LogLine(rest.rstrip(), level_number(found["level"]))
