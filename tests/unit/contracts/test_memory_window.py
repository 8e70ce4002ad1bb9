"""The time window of memory.search and memory.list: aware times, in order, either open."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from memoria_contracts.memory import MemoryList, MemorySearch

MONDAY = datetime(2026, 11, 16, tzinfo=UTC)
NEXT_MONDAY = datetime(2026, 11, 23, tzinfo=UTC)


@pytest.mark.parametrize(
    "window",
    [
        {"since": MONDAY, "until": NEXT_MONDAY},
        {"since": MONDAY},
        {"until": NEXT_MONDAY},
        {"since": MONDAY, "until": MONDAY},
        {},
    ],
)
def test_a_window_in_order_or_open_is_taken(window: dict[str, datetime]) -> None:
    assert MemorySearch(mode="chronological", **window).since == window.get("since")
    assert MemoryList(**window).until == window.get("until")


def test_a_window_that_ends_before_it_starts_is_refused() -> None:
    with pytest.raises(ValidationError, match="since must not be later than until"):
        MemorySearch(queries=["tea"], since=NEXT_MONDAY, until=MONDAY)
    with pytest.raises(ValidationError, match="since must not be later than until"):
        MemoryList(since=NEXT_MONDAY, until=MONDAY)


def test_a_time_without_a_zone_is_refused() -> None:
    with pytest.raises(ValidationError, match="timezone"):
        MemorySearch(mode="chronological", since=datetime(2026, 11, 16))


@pytest.mark.parametrize(
    "moment",
    [
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))),  # 0000-12-31T23:00Z in UTC
        datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-2))),  # the year 10000
    ],
)
def test_a_bound_no_stored_time_can_be_compared_with_is_refused(moment: datetime) -> None:
    with pytest.raises(ValidationError, match="time_out_of_range"):
        MemorySearch(mode="chronological", since=moment)
    with pytest.raises(ValidationError, match="time_out_of_range"):
        MemoryList(until=moment)


@pytest.mark.parametrize(
    "moment",
    [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(999, 12, 31, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=1))),
    ],
)
def test_every_time_the_stores_keep_is_a_bound(moment: datetime) -> None:
    assert MemorySearch(mode="chronological", since=moment).since == moment
    assert MemoryList(until=moment).until == moment


@pytest.mark.parametrize("number", [0.5, 1700000000, "0.5", "1700000000", "2025"])
def test_a_number_is_not_a_time(number: object) -> None:
    with pytest.raises(ValidationError, match="datetime_iso8601"):
        MemoryList.model_validate({"since": number})
