"""The gateway's bookkeeping of quiet cycles (quiet_cycles.py), without I/O: which threads
wait for a cycle, when their user last heard of it, and what they are told."""

from __future__ import annotations

from datetime import UTC, datetime

from memoria_gateway.quiet_cycles import QuietCycles, Watch, status_frame, status_text

QUIET_S = 10.0


def test_a_cycle_is_due_only_after_the_whole_quiet_period() -> None:
    cycles = QuietCycles(QUIET_S)
    cycles.started("ana", "t1", "cyc_1", "en", now=100.0)
    assert cycles.due(109.9) == []
    [watch] = cycles.due(110.0)
    assert (watch.user_id, watch.thread_id, watch.cycle_id) == ("ana", "t1", "cyc_1")


def test_any_frame_of_the_thread_is_news_and_its_cycle_end_stops_the_watch() -> None:
    cycles = QuietCycles(QUIET_S)
    cycles.started("ana", "t1", "cyc_1", "en", now=0.0)
    cycles.heard("ana", "t1", "cyc_1", ended=False, now=8.0)
    assert cycles.due(17.0) == []
    assert len(cycles.due(18.0)) == 1
    cycles.heard("ana", "t1", "cyc_1", ended=True, now=18.0)
    assert len(cycles) == 0
    assert cycles.due(1000.0) == []


def test_a_queued_cycle_is_watched_after_the_one_before_it_ends() -> None:
    cycles = QuietCycles(QUIET_S)
    cycles.started("ana", "t1", "cyc_1", "en", now=0.0)
    cycles.started("ana", "t1", "cyc_2", "pt", now=1.0)
    assert len(cycles) == 1  # one thread: its queue moves one cycle at a time
    cycles.heard("ana", "t1", "cyc_1", ended=True, now=5.0)
    [watch] = cycles.due(15.0)
    assert watch.cycle_id == "cyc_2"
    assert watch.language == "pt"


def test_frames_of_other_threads_or_users_are_no_news() -> None:
    cycles = QuietCycles(QUIET_S)
    cycles.started("ana", "t1", "cyc_1", "en", now=0.0)
    cycles.heard("ana", "t2", "cyc_9", ended=True, now=9.0)
    cycles.heard("bob", "t1", "cyc_1", ended=True, now=9.0)
    assert len(cycles.due(10.0)) == 1


def test_once_told_the_user_is_told_again_after_another_quiet_period() -> None:
    cycles = QuietCycles(QUIET_S)
    cycles.started("ana", "t1", "cyc_1", "en", now=0.0)
    [watch] = cycles.due(10.0)
    cycles.told(watch, now=10.0)
    assert cycles.due(19.0) == []
    assert cycles.due(20.0) == [watch]


def test_a_user_without_sockets_is_forgotten() -> None:
    cycles = QuietCycles(QUIET_S)
    cycles.started("ana", "t1", "cyc_1", "en", now=0.0)
    cycles.started("ana", "t2", "cyc_2", "en", now=0.0)
    cycles.started("bob", "t1", "cyc_3", "en", now=0.0)
    cycles.forget_user("ana")
    assert [w.user_id for w in cycles.due(100.0)] == ["bob"]


def test_the_status_names_the_cause_in_the_users_language() -> None:
    assert "broker" in status_text("broker", "en", [])
    assert "broker" in status_text("broker", "pt", [])
    assert "decision, memory" in status_text("service", "en", ["decision", "memory"])
    assert "não está respondendo" in status_text("service", "pt", ["memory"])
    assert "longer than usual" in status_text("slow", "en", [])


def test_the_status_frame_is_a_transient_line_of_the_cycle_without_an_event_id() -> None:
    watch = Watch("ana", "t1", "en", last_news=0.0, cycles=["cyc_7"])
    frame = status_frame(watch, "Still working", datetime(2026, 1, 1, tzinfo=UTC))
    data = frame.model_dump(mode="json", by_alias=True)
    assert data["id"] == "wait:cyc_7"
    assert data["cycle_id"] == "cyc_7"
    assert data["thread_id"] == "t1"
    assert (data["modal"], data["role"], data["chat-history"]) == (
        "textForReplace",
        "system",
        False,
    )
    assert "event_id" not in data


def test_a_cycle_accepted_twice_is_watched_once_and_a_new_message_is_no_news() -> None:
    cycles = QuietCycles(QUIET_S)
    cycles.started("ana", "t1", "cyc_1", "en", now=0.0)
    cycles.started("ana", "t1", "cyc_1", "en", now=1.0)  # the same message sent again
    cycles.started("ana", "t1", "cyc_2", "en", now=9.0)  # queued: the running one is quiet
    [watch] = cycles.due(10.0)
    assert watch.cycles == ["cyc_1", "cyc_2"]
    cycles.heard("ana", "t1", "cyc_1", ended=True, now=11.0)
    cycles.heard("ana", "t1", "cyc_2", ended=True, now=12.0)
    assert len(cycles) == 0
