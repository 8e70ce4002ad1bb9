"""Progress of a long command (`memoria import`, `export`, `reembed`): a rich bar (count,
rate, time left) on a terminal, and a plain line every few seconds when the output is a pipe
or a file (a log, CI), so a long run is never silent and never fills a log with redraws.

Messages that must appear while it runs (a bad line of an import) go through :meth:`note`:
on a terminal they are printed above the bar instead of through it. A command the CLI runs in
a process of its own (`memoria reembed`) reports on a socket, and :func:`relay` shows it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Final, Protocol, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

PLAIN_INTERVAL_S: Final = 5.0
"""How often a plain progress line is written: often enough to show life, rarely enough
for a log."""


class Tracker(Protocol):
    def advance(self, count: int = 1) -> None: ...

    def note(self, text: str) -> None: ...


class RateColumn(ProgressColumn):
    """Items per second (rich's own speed column counts bytes)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        shown = "?" if speed is None else f"{speed:.1f}"
        return Text(f"{shown}/s", style="progress.data.speed")


class BarTracker:
    def __init__(self, progress: Progress, task_id: TaskID) -> None:
        self._progress = progress
        self._task_id = task_id

    def advance(self, count: int = 1) -> None:
        self._progress.advance(self._task_id, count)

    def note(self, text: str) -> None:
        self._progress.console.print(text, markup=False, highlight=False, soft_wrap=True)


class PlainTracker:
    """``importing: 400/2000 lines, 35.2/s, about 45 s left`` every ``interval_s``."""

    def __init__(
        self,
        stream: TextIO,
        what: str,
        unit: str,
        total: int | None,
        *,
        interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream, self._what, self._unit, self._total = stream, what, unit, total
        self._interval_s = PLAIN_INTERVAL_S if interval_s is None else interval_s
        self._clock = clock
        self._started = self._last = clock()
        self.done = 0

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = self._clock()
        if now - self._last >= self._interval_s:
            self._last = now
            self._stream.write(self.line(now) + "\n")
            self._stream.flush()

    def note(self, text: str) -> None:
        self._stream.write(text + "\n")

    def line(self, now: float) -> str:
        elapsed = now - self._started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        count = f"{self.done}/{self._total}" if self._total is not None else str(self.done)
        text = f"{self._what}: {count} {self._unit}, {rate:.1f}/s"
        if self._total is not None and rate > 0:
            text += f", about {round((self._total - self.done) / rate)} s left"
        return text


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real file
        return False


@contextmanager
def track(
    stream: TextIO,
    what: str,
    unit: str,
    total: int | None,
    *,
    terminal: bool | None = None,
) -> Iterator[Tracker]:
    """Report progress of ``what`` (``total`` ``unit``, None if unknown) on ``stream``: a bar
    if it is a terminal (``terminal`` overrides the guess), plain lines otherwise."""
    if not (is_terminal(stream) if terminal is None else terminal):
        yield PlainTracker(stream, what, unit, total)
        return
    console = Console(file=stream, force_terminal=True)
    columns: list[ProgressColumn] = [TextColumn("{task.description}"), BarColumn()]
    if total is not None:
        columns += [MofNCompleteColumn(), RateColumn(), TimeRemainingColumn()]
    else:
        columns += [TextColumn("{task.completed} " + unit), RateColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console, redirect_stdout=False, redirect_stderr=False) as bar:
        yield BarTracker(bar, bar.add_task(what, total=total))


def relay(sock: socket.socket, stream: TextIO, what: str, unit: str) -> None:
    """Show what a command in another process reports on ``sock`` (JSON lines: ``{"total":
    N}``, ``{"advance": n}``, ``{"end": true}``; ``memoria_memory.progress_feed``) until it
    ends or the socket closes. The end is answered once the display is closed, so the
    command's next output is never drawn over."""
    with sock.makefile("rb") as lines:
        for line in lines:
            if "total" in (started := _message(line)):
                total = started["total"]
                with track(stream, what, unit, total if isinstance(total, int) else None) as shown:
                    ended = _follow(lines, shown)
                if ended:
                    with contextlib.suppress(OSError):
                        sock.sendall(b"\n")
                return


def _follow(lines: Iterable[bytes], shown: Tracker) -> bool:
    for line in lines:
        message = _message(line)
        if message.get("end"):
            return True
        count = message.get("advance")
        if isinstance(count, int):
            shown.advance(count)
    return False


def _message(line: bytes) -> dict[str, object]:
    try:
        message = json.loads(line)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}
