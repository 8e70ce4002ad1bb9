"""Times a client sends: ISO 8601 with a UTC offset, within the range the stores keep.

Stores keep times as fixed-width UTC text (``YYYY-MM-DDTHH:MM:SS.ffffffZ``, so that they
sort as strings in SQLite and MongoDB alike), which holds the years 0001 to 9999 of UTC. A
time that falls outside once it is converted to UTC (``0001-01-01T00:30:00+01:00``) is
refused where it comes in, with the reason, rather than breaking a write further on.
Numbers are refused too: "0.5" is not the half second after 1970 to anyone who types it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Final

from pydantic import AfterValidator, AwareDatetime, BeforeValidator
from pydantic_core import PydanticCustomError

EARLIEST_STORABLE: Final = datetime(1, 1, 1, tzinfo=UTC)
LATEST_STORABLE: Final = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
STORABLE_RANGE: Final = "0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"

OUT_OF_RANGE: Final = "time_out_of_range"
NOT_ISO_8601: Final = "datetime_iso8601"
"""The pydantic error types of :data:`StorableTime`."""

_ISO_DATE_TIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]")


def iso_8601_only(value: Any) -> Any:
    """A time as text must be ISO 8601 (a date, then a time); numbers and numeric strings,
    which pydantic would read as seconds since 1970, are refused."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and _ISO_DATE_TIME.match(value):
        return value
    raise PydanticCustomError(
        NOT_ISO_8601, "a time must be ISO 8601 with its UTC offset, e.g. 2025-01-31T09:30:00Z"
    )


def within_storable_range(moment: datetime) -> datetime:
    if not EARLIEST_STORABLE <= moment <= LATEST_STORABLE:
        raise PydanticCustomError(
            OUT_OF_RANGE,
            "a time must fall between {range} (UTC), the times the stores keep",
            {"range": STORABLE_RANGE},
        )
    return moment


StorableTime = Annotated[
    AwareDatetime, BeforeValidator(iso_8601_only), AfterValidator(within_storable_range)
]
"""A time with its offset, in ISO 8601, that the stores can keep."""
