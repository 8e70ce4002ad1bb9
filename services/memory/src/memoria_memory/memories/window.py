"""A time window on when memories were told (``creation_datetime``), as document filters.

Stamps are fixed-width UTC text (``clock.stamp``), so a range on them is a range of text
that both document stores compare, and that the ``(user_id, state, creation_datetime)``
index serves.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memoria_memory.memories import clock


@dataclass(frozen=True)
class TimeWindow:
    since: datetime | None = None
    """Inclusive."""
    until: datetime | None = None
    """Exclusive."""

    @property
    def open(self) -> bool:
        """No bound at all: every memory is inside."""
        return self.since is None and self.until is None

    def clauses(self) -> list[dict[str, Any]]:
        bounds: dict[str, str] = {}
        if self.since is not None:
            bounds["$gte"] = clock.stamp(self.since)
        if self.until is not None:
            bounds["$lt"] = clock.stamp(self.until)
        return [{"creation_datetime": bounds}] if bounds else []


NO_WINDOW = TimeWindow()
