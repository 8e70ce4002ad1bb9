"""Fault injection for crash tests: die at a named point, as a kill -9 would.

Only ``MEMORIA_FAULT_INJECTION`` turns a point on; the points are the gaps between the steps
of a write, where a real crash would leave a half-done state for the reconciler to repair.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from typing import Final, Literal

log = logging.getLogger("memoria.memory.faults")

FaultPoint = Literal[
    "save.after_document",
    "save.after_vectors",
    "update.after_document",
    "update.after_vectors",
    "delete.after_mark",
    "delete.after_vectors",
]
FAULT_POINTS: Final[frozenset[str]] = frozenset(FaultPoint.__args__)  # type: ignore[attr-defined]
KILLED_EXIT_CODE: Final = 137  # what a shell reports for a process killed by SIGKILL


class Faults:
    def __init__(self, points: Collection[str]) -> None:
        unknown = set(points) - FAULT_POINTS
        if unknown:
            raise ValueError(
                f"unknown fault points {sorted(unknown)}; known: {sorted(FAULT_POINTS)}"
            )
        self._points = frozenset(points)
        if self._points:
            log.warning("FAULT INJECTION ON: the service will die at %s", sorted(self._points))

    def point(self, name: FaultPoint) -> None:
        if name in self._points:
            log.error("fault injection: dying at %s", name)
            logging.shutdown()
            os._exit(KILLED_EXIT_CODE)  # no cleanup, no flush: like SIGKILL
