"""Prefixed, optionally colored output shared by every supervised process.

Every line is written whole (prefix + text + newline) with one ``write`` call, so lines from
different processes never interleave mid-line.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
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
SEPARATOR = " | "
_RESET = "\x1b[0m"
_BOLD = 1


def color_enabled(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Color only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real file
        return False


def _sgr(*codes: int) -> str:
    return "\x1b[" + ";".join(str(code) for code in codes) + "m"


class Console:
    """Writes ``name | text`` lines; the supervisor's own messages use ``label``."""

    def __init__(
        self,
        stream: TextIO,
        names: Iterable[str],
        *,
        label: str,
        color: bool | None = None,
    ) -> None:
        self._stream = stream
        self._label = label
        self._width = max((len(name) for name in [label, *names]), default=len(label))
        self._color = color_enabled(stream) if color is None else color

    def line(self, name: str, text: str, color: str | None = None) -> None:
        """One line of a process's output."""
        self._write(self._prefix(name, color), text)

    def report(self, text: str) -> None:
        """A message of the supervisor itself (starts, stops, readiness)."""
        self._write(self._prefix(self._label, None, bold=True), text)

    def alert(self, text: str) -> None:
        """A message that must stand out: crashes, restarts, failures."""
        if self._color:
            text = f"{_sgr(_BOLD, ANSI_COLORS[ALERT_COLOR])}{text}{_RESET}"
        self._write(self._prefix(self._label, ALERT_COLOR, bold=True), text)

    def _prefix(self, name: str, color: str | None, *, bold: bool = False) -> str:
        prefix = name.ljust(self._width) + SEPARATOR.rstrip()
        if not self._color:
            return prefix
        codes = [_BOLD] if bold else []
        if color is not None and color in ANSI_COLORS:
            codes.append(ANSI_COLORS[color])
        return f"{_sgr(*codes)}{prefix}{_RESET}" if codes else prefix

    def _write(self, prefix: str, text: str) -> None:
        try:
            self._stream.write(f"{prefix} {text}\n")
            self._stream.flush()
        except (OSError, ValueError):
            # Nobody reads our output any more (closed pipe, closed terminal): keep supervising
            # rather than crash and leave the processes unattended.
            pass
