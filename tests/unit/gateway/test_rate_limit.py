"""The per-connection token bucket, on a clock the test moves."""

from __future__ import annotations

import pytest

from memoria_gateway.rate_limit import TokenBucket, retry_after_seconds


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_a_burst_passes_at_once_and_the_next_message_waits(clock: Clock) -> None:
    bucket = TokenBucket(per_minute=30, burst=10, clock=clock)
    assert [bucket.take() for _ in range(10)] == [0.0] * 10
    assert bucket.take() == pytest.approx(2.0)  # 30 a minute: one every 2 s


def test_a_refused_message_costs_nothing(clock: Clock) -> None:
    bucket = TokenBucket(per_minute=60, burst=1, clock=clock)
    assert bucket.take() == 0.0
    for _ in range(5):
        assert bucket.take() == pytest.approx(1.0)
    clock.now += 1.0
    assert bucket.take() == 0.0


def test_a_steady_sender_is_held_to_the_rate(clock: Clock) -> None:
    bucket = TokenBucket(per_minute=30, burst=2, clock=clock)
    bucket.take(), bucket.take()
    accepted = 0
    for _ in range(60):  # one attempt a second for a minute
        clock.now += 1.0
        accepted += bucket.take() == 0.0
    assert accepted == 30


def test_a_quiet_connection_gets_its_burst_back_but_no_more(clock: Clock) -> None:
    bucket = TokenBucket(per_minute=30, burst=3, clock=clock)
    for _ in range(3):
        bucket.take()
    clock.now += 3600
    assert [bucket.take() for _ in range(4)][:3] == [0.0] * 3
    assert bucket.take() > 0


def test_the_wait_told_to_people_is_whole_seconds_and_never_zero() -> None:
    assert retry_after_seconds(0.01) == 1
    assert retry_after_seconds(1.0) == 1
    assert retry_after_seconds(1.2) == 2


def test_a_limit_that_lets_nothing_through_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        TokenBucket(per_minute=0, burst=1)
