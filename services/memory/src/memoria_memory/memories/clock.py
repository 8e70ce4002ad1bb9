"""Timestamps as stored: fixed-width ISO-8601 UTC text, so they sort correctly as strings in
both document stores (``datetime.isoformat`` drops zero microseconds, which breaks that)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def now() -> datetime:
    return datetime.now(UTC)


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_FORMAT)


def parse(text: str) -> datetime:
    # fromisoformat reads the stamp format ("...Z" included) far faster than strptime,
    # and a search parses dozens of stamps.
    return datetime.fromisoformat(text).astimezone(UTC)


def stamp_ago(seconds: float) -> str:
    return stamp(now() - timedelta(seconds=seconds))
