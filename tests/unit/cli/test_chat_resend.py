"""When `memoria chat` sends a refused message again, and after how long."""

from __future__ import annotations

import pytest

from memoria_cli.chat.resend import ResendPolicy, retry_after
from memoria_cli.gateway_client import (
    DEFAULT_RETRY_AFTER_S,
    MAX_RETRY_AFTER_S,
    RATE_LIMITED_TRIES,
)


def refusal(code: str, **fields: object) -> dict[str, object]:
    return {"type": "error", "code": code, "message": "refused", **fields}


def test_a_rate_refusal_waits_as_long_as_the_gateway_says() -> None:
    policy = ResendPolicy()
    assert policy.delay(refusal("rate_limited", retry_after=7), 1) == 7.0
    assert policy.delay(refusal("rate_limited", retry_after=7), RATE_LIMITED_TRIES - 1) == 7.0


def test_rate_refusals_stop_being_waited_out_after_the_tries() -> None:
    assert ResendPolicy().delay(refusal("rate_limited", retry_after=1), RATE_LIMITED_TRIES) is None
    assert ResendPolicy(rate_limited_tries=1).delay(refusal("rate_limited"), 1) is None


def test_broker_refusals_back_off_then_stop() -> None:
    policy = ResendPolicy(broker_delays=(1.0, 3.0))
    away = refusal("broker_unavailable")
    assert [policy.delay(away, n) for n in (1, 2, 3)] == [1.0, 3.0, None]


@pytest.mark.parametrize("code", ["too_large", "invalid_frame", "not_found", "unavailable"])
def test_other_refusals_are_final(code: str) -> None:
    assert ResendPolicy().delay(refusal(code), 1) is None


def test_an_accepted_reply_is_never_resent() -> None:
    assert ResendPolicy().delay({"type": "accepted", "id": "msg_1"}, 1) is None


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (3, 3.0),
        (0, 0.0),
        (-5, 0.0),
        (10_000, MAX_RETRY_AFTER_S),  # a minute at most, whatever a gateway says
        (None, DEFAULT_RETRY_AFTER_S),  # a gateway older than the field
        ("2", DEFAULT_RETRY_AFTER_S),
        (True, DEFAULT_RETRY_AFTER_S),
    ],
)
def test_retry_after_is_read_within_bounds(value: object, seconds: float) -> None:
    frame = refusal("rate_limited") if value is None else refusal("rate_limited", retry_after=value)
    assert retry_after(frame) == seconds
