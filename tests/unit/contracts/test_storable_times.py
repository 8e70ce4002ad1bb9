"""The times clients send: ISO 8601 with an offset, within the years the stores keep (UTC)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import BaseModel, ValidationError

from memoria_contracts.times import (
    EARLIEST_STORABLE,
    LATEST_STORABLE,
    NOT_ISO_8601,
    OUT_OF_RANGE,
    STORABLE_RANGE,
    StorableTime,
)


class At(BaseModel):
    when: StorableTime


def refusal(value: object) -> tuple[str, str]:
    with pytest.raises(ValidationError) as refused:
        At(when=value)
    (error,) = refused.value.errors()
    return error["type"], error["msg"]


def test_the_range_is_every_instant_of_the_years_0001_to_9999_utc() -> None:
    assert datetime(1, 1, 1, tzinfo=UTC) == EARLIEST_STORABLE
    assert datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC) == LATEST_STORABLE
    assert At(when="0001-01-01T00:00:00Z").when == EARLIEST_STORABLE
    assert At(when="9999-12-31T23:59:59.999999Z").when == LATEST_STORABLE


@pytest.mark.parametrize(
    "outside",
    [
        "0001-01-01T00:30:00+01:00",  # 0000-12-31T23:30 in UTC
        "9999-12-31T23:59:59.999999-00:01",  # the year 10000 in UTC
        datetime(9999, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-1))),
    ],
)
def test_a_time_outside_the_range_once_in_utc_is_refused_with_the_range(outside: object) -> None:
    kind, message = refusal(outside)
    assert kind == OUT_OF_RANGE == "time_out_of_range"
    assert message == (
        f"a time must fall between {STORABLE_RANGE} (UTC), the times the stores keep"
    )
    assert STORABLE_RANGE == "0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"


@pytest.mark.parametrize("number", [0.5, 1700000000, "0.5", "1700000000", "yesterday", None])
def test_numbers_and_other_text_are_not_times(number: object) -> None:
    kind, message = refusal(number)
    assert kind == NOT_ISO_8601 == "datetime_iso8601"
    assert message == "a time must be ISO 8601 with its UTC offset, e.g. 2025-01-31T09:30:00Z"


@pytest.mark.parametrize(
    "text", ["2025-01-31T09:30:00Z", "2025-01-31t09:30:00+00:00", "2025-01-31 09:30:00Z"]
)
def test_iso_8601_with_any_date_time_separator_is_taken(text: str) -> None:
    assert At(when=text).when == datetime(2025, 1, 31, 9, 30, tzinfo=UTC)


def test_a_datetime_object_is_taken_as_it_is() -> None:
    moment = datetime(2025, 1, 31, 9, 30, tzinfo=timezone(timedelta(hours=2)))
    assert At(when=moment).when == moment


def test_a_time_without_its_offset_is_refused() -> None:
    kind, _ = refusal("2025-01-31T09:30:00")
    assert kind == "timezone_aware"
