"""Stream entry ids, and the order of a resuming socket's live frames around its replay."""

from __future__ import annotations

import pytest

from memoria_gateway.resume import LiveGate
from memoria_runtime.bus.entry_id import EntryId


def eid(text: str) -> EntryId:
    parsed = EntryId.parse(text)
    assert parsed is not None
    return parsed


def test_entry_ids_order_as_redis_orders_them() -> None:
    ids = ["999-5", "1000-0", "1000-2", "1000-10", "1001-0"]
    assert sorted(ids, key=eid) == ids
    assert sorted(ids) != ids  # as text, "1000-10" < "1000-2" and "1000-0" < "999-5"
    assert str(eid("1732350000000-10")) == "1732350000000-10"
    assert eid("5-0") == EntryId.parse(b"5-0")


@pytest.mark.parametrize(
    "text",
    ["", "abc", "5", "5-", "-5", "5-0-1", " 5-0", "5-0\n", "1e3-0", "99999999999999999999-0"],
)
def test_what_is_not_an_entry_id(text: str) -> None:
    assert EntryId.parse(text) is None


def test_a_gate_that_holds_nothing_sends_everything() -> None:
    gate = LiveGate()
    assert gate.offer(eid("1-0"), "a")
    assert gate.offer(eid("2-0"), "b")


def test_live_frames_wait_for_the_replay_and_those_it_had_are_dropped() -> None:
    gate = LiveGate()
    gate.hold()
    for n in range(1, 6):  # frames 1..5 arrive live while entries up to 3 are replayed
        assert not gate.offer(eid(f"{n}-0"), f"live {n}")
    assert gate.held == 5
    assert gate.release(eid("3-0")) == ["live 4", "live 5"]
    assert gate.release(eid("3-0")) == []
    gate.open()
    assert gate.offer(eid("6-0"), "live 6")


def test_frames_that_arrive_while_held_ones_are_sent_wait_their_turn() -> None:
    gate = LiveGate()
    gate.hold()
    gate.offer(eid("4-0"), "live 4")
    assert gate.release(eid("3-0")) == ["live 4"]
    assert not gate.offer(eid("5-0"), "live 5")  # still holding until open()
    assert gate.release(eid("3-0")) == ["live 5"]
    assert gate.release(eid("3-0")) == []
    gate.open()
    assert not gate.holding


def test_a_fan_out_behind_the_replay_repeats_nothing_later() -> None:
    gate = LiveGate()
    gate.hold()
    assert gate.release(eid("10-0")) == []
    gate.open()
    # This replica's fan-out had not yet reached what the replay read from the stream.
    assert not gate.offer(eid("9-0"), "replayed already")
    assert not gate.offer(eid("10-0"), "replayed already")
    assert gate.offer(eid("10-1"), "new")


def test_without_a_known_position_every_held_frame_goes_out() -> None:
    gate = LiveGate()
    gate.hold()
    gate.offer(eid("1-0"), "a")
    gate.offer(eid("2-0"), "b")
    assert gate.release(None) == ["a", "b"]
    gate.open()
    assert gate.offer(eid("1-5"), "c")
