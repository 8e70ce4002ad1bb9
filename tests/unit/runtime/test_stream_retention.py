"""Where a stream is cut (bus/retention.py), without a broker: the age cut, held back by any
group that still needs older entries."""

from __future__ import annotations

import pytest

from memoria_contracts.streams import Stream
from memoria_runtime.bus.entry_id import EntryId
from memoria_runtime.bus.retention import (
    GroupPosition,
    pinning,
    retention_of,
    trim_interval,
    trim_point,
)
from memoria_runtime.settings import BusSettings

AGE_CUT = EntryId(10_000, 0)


def group(last: str, pending: str | None = None, name: str = "g") -> GroupPosition:
    return GroupPosition(name, EntryId.of(last), None if pending is None else EntryId.of(pending))


def test_entry_ids_order_by_time_then_sequence_and_print_as_redis_writes_them() -> None:
    assert EntryId.of(b"5-2") < EntryId.of("5-10") < EntryId.of("6-0")
    assert str(EntryId.of("1700000000000-3").next()) == "1700000000000-4"
    assert EntryId.of("42") == EntryId(42, 0)


def test_without_groups_the_age_cut_applies() -> None:
    assert trim_point(AGE_CUT, []) == AGE_CUT


def test_groups_that_read_and_acknowledged_past_the_cut_do_not_hold_it() -> None:
    assert trim_point(AGE_CUT, [group("20000-0"), group("15000-3")]) == AGE_CUT


def test_a_pending_entry_holds_the_cut_at_itself() -> None:
    assert trim_point(AGE_CUT, [group("20000-0", pending="4000-1")]) == EntryId(4000, 1)


def test_entries_a_group_has_not_read_hold_the_cut_just_after_its_last_read() -> None:
    assert trim_point(AGE_CUT, [group("7000-5")]) == EntryId(7000, 6)
    assert trim_point(AGE_CUT, [group("0-0")]) == EntryId(0, 1)  # never read: keep all


def test_the_group_furthest_behind_decides() -> None:
    positions = [group("20000-0"), group("9000-0", pending="3000-0"), group("8000-0")]
    assert trim_point(AGE_CUT, positions) == EntryId(3000, 0)


def test_a_group_holding_entries_several_retentions_old_is_named() -> None:
    now_ms, retention_s = 1_000_000, 100.0
    recent = group("990000-0", name="recent")
    stuck = group("990000-0", pending="600000-0", name="stuck")
    assert pinning([recent, stuck], EntryId(0, 0), now_ms, retention_s) == [stuck]
    # Exactly PINNED_WARNING retentions old is not yet named.
    at_the_bound = group("990000-0", pending="700000-0", name="at-the-bound")
    assert pinning([at_the_bound], EntryId(0, 0), now_ms, retention_s) == []
    # Waiting for entries older than any the stream still has is holding nothing.
    assert pinning([recent, stuck], EntryId(995000, 0), now_ms, retention_s) == []


def test_dead_letters_keep_days_and_other_streams_the_stream_retention() -> None:
    settings = BusSettings(stream_retention_seconds=120, dead_letter_retention_days=2)
    assert retention_of(Stream.DEAD_LETTER, settings) == 2 * 24 * 3600
    assert retention_of(Stream.CHAT_OUT, settings) == 120


@pytest.mark.parametrize(("retention", "interval"), [(300, 30), (10, 5), (86400, 60)])
def test_streams_are_trimmed_ten_times_a_retention_within_bounds(
    retention: float, interval: float
) -> None:
    assert trim_interval(BusSettings(stream_retention_seconds=retention)) == interval
