"""The one line format of `memoria run`, whatever process wrote the line:

    15:58:51 INFO    decision      | starting as consumer vm-8153 on redis://127.0.0.1:6390/0

time (of relay, so that lines of different processes sort by it), level, process name, text.
Color only on a terminal (:func:`color_enabled`). Every line is written whole with one
``write`` call, so lines from different processes never interleave mid-line.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TextIO

# Plain ANSI SGR codes: enough for a prefix and no dependency on a terminal library.
ANSI_COLORS: Mapping[str, int] = {
    "red": 31,
    "green": 32,
    "yellow": 33,
    "blue": 34,
    "magenta": 35,
    "cyan": 36,
    "white": 37,
    "bright_black": 90,
    "bright_red": 91,
    "bright_green": 92,
    "bright_yellow": 93,
    "bright_blue": 94,
    "bright_magenta": 95,
    "bright_cyan": 96,
}
PALETTE = ("cyan", "green", "yellow", "magenta", "blue", "bright_cyan", "bright_green")
ALERT_COLOR = "bright_red"
LEVEL_COLORS: Mapping[int, str] = {
    logging.DEBUG: "bright_black",
    logging.WARNING: "yellow",
    logging.ERROR: "bright_red",
    logging.CRITICAL: "bright_red",
}
TIME_COLOR = "bright_black"
TIME_FORMAT = "%H:%M:%S"
LEVEL_WIDTH = len("WARNING")
SEPARATOR = " | "
_RESET = "\x1b[0m"
_BOLD = 1


def color_enabled(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Color on a terminal only. NO_COLOR (https://no-color.org) turns it off everywhere,
    FORCE_COLOR (https://force-color.org) on everywhere else; both count when non-empty.
    A dumb terminal gets none."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    if env.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real file
        return False


def _sgr(*codes: int) -> str:
    return "\x1b[" + ";".join(str(code) for code in codes) + "m"


def _paint(text: str, color: str | None, *, bold: bool = False) -> str:
    codes = [_BOLD] if bold else []
    if color is not None and color in ANSI_COLORS:
        codes.append(ANSI_COLORS[color])
    return f"{_sgr(*codes)}{text}{_RESET}" if codes else text


class Console:
    """Writes lines of processes (:meth:`line`) and of the supervisor itself, under
    ``label`` (:meth:`report`, :meth:`alert`)."""

    def __init__(
        self,
        stream: TextIO,
        names: Iterable[str],
        *,
        label: str,
        color: bool | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._stream = stream
        self._label = label
        self._width = max((len(name) for name in [label, *names]), default=len(label))
        self._color = color_enabled(stream) if color is None else color
        self._clock = clock

    def line(self, name: str, level: int, text: str, color: str | None = None) -> None:
        """One line of a process's output, already free of its own time and level."""
        self._write(self.format(name, level, text, color))

    def report(self, text: str, level: int = logging.INFO) -> None:
        """A message of the supervisor itself (starts, stops, readiness)."""
        self._write(self.format(self._label, level, text, None, bold=True))

    def alert(self, text: str) -> None:
        """A message that must stand out: crashes, restarts, failures."""
        if self._color:
            text = _paint(text, ALERT_COLOR, bold=True)
        self._write(self.format(self._label, logging.ERROR, text, ALERT_COLOR, bold=True))

    def format(
        self, name: str, level: int, text: str, color: str | None, *, bold: bool = False
    ) -> str:
        stamp = time.strftime(TIME_FORMAT, time.localtime(self._clock()))
        level_name = logging.getLevelName(level).ljust(LEVEL_WIDTH)
        prefix = name.ljust(self._width) + SEPARATOR.rstrip()
        if self._color:
            stamp = _paint(stamp, TIME_COLOR)
            level_name = _paint(level_name, LEVEL_COLORS.get(level))
            prefix = _paint(prefix, color, bold=bold)
        return f"{stamp} {level_name} {prefix} {text}"

    def _write(self, line: str) -> None:
        try:
            self._stream.write(line + "\n")
            self._stream.flush()
        except (OSError, ValueError):
            # Nobody reads our output any more (closed pipe, closed terminal): keep supervising
            # rather than crash and leave the processes unattended.
            pass
