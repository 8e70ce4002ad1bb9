"""How a maintenance command run by the CLI reports its progress: JSON lines on a socket the
CLI hands over (``--progress-fd``), which the CLI turns into its progress display.

The command draws nothing itself, so the display is the CLI's alone (services never import the
CLI). The lines: ``{"total": N}`` when the work starts (``null``: not known), ``{"advance": n}``
as it goes, ``{"end": true}`` when it is done; the command then waits for the CLI's one-line
answer, sent once the display is closed, so what it prints next is never drawn over.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Callable
from typing import Final

ACK_WAIT_S: Final = 5.0
"""Longest the command waits for the CLI to close its display; past it, it goes on."""


class ProgressSocket:
    """The command's end of the CLI's socket."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    @classmethod
    def from_fd(cls, fd: int) -> ProgressSocket:
        return cls(socket.socket(fileno=fd))

    def start(self, total: int | None) -> None:
        self._send({"total": total})

    def advance(self, count: int) -> None:
        if count:
            self._send({"advance": count})

    def end(self) -> None:
        """Says the work is done and waits for the CLI to close its display."""
        try:
            self._send({"end": True})
            self._sock.settimeout(ACK_WAIT_S)
            self._sock.recv(1)
        except OSError:
            pass  # the CLI went away or is slow: the command's own output matters more
        finally:
            self._sock.close()

    def _send(self, line: dict[str, object]) -> None:
        with contextlib.suppress(OSError):  # no display is no reason to stop the work
            self._sock.sendall(json.dumps(line).encode() + b"\n")


class RunningTotals:
    """Turns running totals (done so far) into the steps a display advances by."""

    def __init__(self, advance: Callable[[int], None]) -> None:
        self._advance = advance
        self._done = 0

    def __call__(self, done: int) -> None:
        self._advance(done - self._done)
        self._done = done
