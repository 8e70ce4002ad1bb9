"""Timestamps as stored: fixed-width ISO-8601 UTC text (``YYYY-MM-DDTHH:MM:SS.ffffffZ``), so
that they sort correctly as strings in both document stores. ``datetime.isoformat`` drops
zero microseconds and ``strftime`` writes the year 999 as "999": either breaks that."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

_AFTER_YEAR: Final = "-%m-%dT%H:%M:%S.%fZ"
_SHORT_YEAR: Final = re.compile(r"^(\d{1,3})-")


def now() -> datetime:
    return datetime.now(UTC)


def stamp(moment: datetime) -> str:
    utc = moment.astimezone(UTC)
    return f"{utc.year:04d}{utc.strftime(_AFTER_YEAR)}"


def parse(text: str) -> datetime:
    # fromisoformat reads the stamp format ("...Z" included) far faster than strptime,
    # and a search parses dozens of stamps.
    try:
        return datetime.fromisoformat(text).astimezone(UTC)
    except ValueError:
        # Written before years were zero-padded: "999-01-01T…" is the year 999.
        padded = _SHORT_YEAR.sub(lambda year: f"{year[1].zfill(4)}-", text, count=1)
        if padded == text:
            raise
        return datetime.fromisoformat(padded).astimezone(UTC)


def canonical(text: str) -> str:
    """A stored stamp in today's form (the same text when it already is)."""
    return stamp(parse(text))


def stamp_ago(seconds: float) -> str:
    return stamp(now() - timedelta(seconds=seconds))
