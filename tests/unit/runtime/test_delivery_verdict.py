"""When a reclaimed entry may run again: failures of its own count, broker outages do not
(docs/chaos.md, bug 6), and crashes count so an entry that kills its consumer ends."""

from __future__ import annotations

import pytest
from redis.exceptions import BusyLoadingError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memoria_runtime.bus.consumer import Verdict, is_outage


def test_a_first_redelivery_after_one_failure_may_run() -> None:
    assert Verdict(deliveries=2, outages=0, max_deliveries=5).refusal is None


def test_an_entry_that_failed_max_deliveries_times_is_refused() -> None:
    verdict = Verdict(deliveries=6, outages=0, max_deliveries=5)
    assert verdict.strikes == 5
    assert verdict.refusal == "failed 5 times"


def test_deliveries_cut_short_by_outages_are_not_strikes() -> None:
    verdict = Verdict(deliveries=9, outages=5, max_deliveries=5)
    assert verdict.strikes == 3
    assert verdict.refusal is None


def test_outages_do_not_keep_an_entry_alive_for_ever() -> None:
    verdict = Verdict(deliveries=21, outages=20, max_deliveries=5)
    assert verdict.strikes == 0
    assert verdict.refusal is not None
    assert "20 times without success" in verdict.refusal


@pytest.mark.parametrize(
    "exc",
    [
        RedisConnectionError("Connection refused"),
        RedisTimeoutError("Timeout reading from socket"),
        BusyLoadingError("Redis is loading the dataset in memory"),
    ],
)
def test_the_broker_being_away_is_an_outage(exc: Exception) -> None:
    assert is_outage(exc)


def test_an_outage_behind_another_error_is_an_outage() -> None:
    wrapped = RuntimeError("saving the cycle state failed")
    wrapped.__cause__ = RedisConnectionError("Connection reset by peer")
    assert is_outage(wrapped)


@pytest.mark.parametrize(
    "exc", [RuntimeError("bug"), ResponseError("WRONGTYPE"), ValueError("bad input")]
)
def test_other_failures_are_the_entry_s_own(exc: Exception) -> None:
    assert not is_outage(exc)
