"""Switch detection from the agentHistory log (by the log, not by ids)."""

from __future__ import annotations

from datetime import UTC, datetime

from memoria_contracts.personas import (
    MAX_RESET_TURNS,
    AgentHistoryEntry,
    PersonaApplied,
    detect_switch,
)

AT = datetime(2026, 11, 23, 20, 0, tzinfo=UTC)


def entry(seq: int, previous: str, persona: str) -> AgentHistoryEntry:
    return AgentHistoryEntry(seq=seq, persona=persona, previous=previous, at=AT, by="ana")


def test_no_log_no_switch() -> None:
    found = detect_switch([], None, "cyc_1")
    assert not found.switched and found.record is None


def test_a_new_entry_is_a_switch_and_is_recorded() -> None:
    found = detect_switch([entry(1, "memoria", "tutor")], None, "cyc_1")
    assert found.switched and found.turn == 0 and found.seq == 1
    assert found.previous == "memoria"
    assert found.record == PersonaApplied(seq=1, cycle_id="cyc_1", previous="memoria", turn=0)


def test_the_cycle_after_is_the_next_turn_then_nothing() -> None:
    log = [entry(1, "memoria", "tutor")]
    applied = PersonaApplied(seq=1, cycle_id="cyc_1", previous="memoria", turn=0)
    found = detect_switch(log, applied, "cyc_2")
    assert found.turn == 1 and found.previous == "memoria"  # strategies decide if it resets
    assert found.record is not None and found.record.cycle_id == "cyc_2"
    last = applied.model_copy(update={"turn": MAX_RESET_TURNS - 1})
    done = detect_switch(log, last, "cyc_9")
    assert not done.switched and done.record is None  # no more writes


def test_a_redelivered_cycle_gets_the_same_answer() -> None:
    log = [entry(1, "memoria", "tutor")]
    first = detect_switch(log, None, "cyc_1")
    assert first.record is not None
    # The record was stored, then the cycle's start was delivered again.
    again = detect_switch(log, first.record, "cyc_1")
    assert (again.seq, again.previous, again.turn) == (first.seq, first.previous, first.turn)
    assert again.record is None
    # Also when a switch came in between: the cycle keeps what it applied.
    later = detect_switch([*log, entry(2, "tutor", "coach")], first.record, "cyc_1")
    assert (later.seq, later.turn) == (1, 0)


def test_two_switches_between_cycles_reset_from_the_persona_the_model_saw() -> None:
    log = [entry(1, "memoria", "tutor")]
    applied = PersonaApplied(seq=1, cycle_id="cyc_1", previous="memoria", turn=0)
    log += [entry(2, "tutor", "coach"), entry(3, "coach", "memoria")]
    found = detect_switch(log, applied, "cyc_2")
    assert found.switched and found.turn == 0 and found.seq == 3
    assert found.previous == "tutor"  # cyc_1 ran as the tutor; the coach never answered
    assert found.record is not None and found.record.seq == 3


def test_switching_away_and_back_before_a_cycle_is_no_reset() -> None:
    log = [entry(1, "memoria", "tutor"), entry(2, "tutor", "memoria")]
    found = detect_switch(log, None, "cyc_1")
    assert not found.switched
    assert found.record is not None and found.record.seq == 2  # the position is taken
    after = detect_switch(log, found.record, "cyc_2")
    assert not after.switched and after.record is None


def test_same_ids_but_a_new_entry_is_still_a_switch() -> None:
    # The thread's persona equals the previous cycle's applied entry's persona only by id
    # comparison; the log has a newer entry, and that is what counts.
    log = [entry(1, "memoria", "tutor"), entry(2, "tutor", "coach"), entry(3, "coach", "tutor")]
    applied = PersonaApplied(seq=2, cycle_id="cyc_1", previous="tutor", turn=0)
    found = detect_switch(log, applied, "cyc_2")
    assert found.switched and found.previous == "coach" and found.seq == 3
