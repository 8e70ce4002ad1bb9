"""Sending a message again when the gateway said "not now" rather than "no".

Two refusals are about the moment, not the message: ``rate_limited`` (the frame's
``retry_after`` says how long to wait) and ``broker_unavailable`` (the gateway could not reach
its broker; nothing was queued). A script piped into ``memoria chat`` must not lose a line to
either, and someone typing should not have to type it again, so the chat waits and sends the
same frame again. It keeps its client id, so the gateway takes it at most once. Every other
refusal (``too_large``, ``invalid_frame``) would be refused again and is final.

The retries run on tenacity; this module only says how long to wait after which refusal,
and when to stop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import tenacity

from memoria_cli.gateway_client import DEFAULT_RETRY_AFTER_S, RATE_LIMITED_TRIES, bounded_wait

Frame = Mapping[str, Any]

RESENT_CODES: Final = frozenset({"rate_limited", "broker_unavailable"})
BROKER_RETRY_DELAYS_S: Final = (1.0, 2.0, 4.0, 8.0, 16.0)
"""Waits after each ``broker_unavailable`` in a row: about half a minute in all, longer than a
broker restart with its append-only file takes here."""


@dataclass(frozen=True)
class ResendPolicy:
    rate_limited_tries: int = RATE_LIMITED_TRIES
    broker_delays: tuple[float, ...] = BROKER_RETRY_DELAYS_S

    def delay(self, reply: Frame, refusals: int) -> float | None:
        """Seconds to wait before sending again after ``reply``, the ``refusals``-th refusal
        in a row (from 1); None when the refusal is final."""
        if reply.get("type") != "error":
            return None
        code = reply.get("code")
        if code == "rate_limited" and refusals < self.rate_limited_tries:
            return retry_after(reply)
        if code == "broker_unavailable" and refusals <= len(self.broker_delays):
            return self.broker_delays[refusals - 1]
        return None


def retry_after(reply: Frame) -> float:
    """The frame's ``retry_after``, within 0 to a minute; the default when absent (a gateway
    older than the field) or not a number."""
    value = reply.get("retry_after")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return DEFAULT_RETRY_AFTER_S
    return bounded_wait(float(value))


async def send_until_taken(
    send: Callable[[], Awaitable[Frame]],
    policy: ResendPolicy,
    on_wait: Callable[[Frame, float], None],
) -> Frame:
    """``send`` until its reply is no longer a refusal worth waiting out; that last reply.
    ``send`` must be a coroutine function (tenacity awaits only those); ``on_wait`` hears
    each refusal that will be sent again, with the wait before it."""

    def delay(state: tenacity.RetryCallState) -> float | None:
        assert state.outcome is not None  # tenacity asks only after an attempt
        reply: Frame = state.outcome.result()
        return policy.delay(reply, state.attempt_number)

    def announce(state: tenacity.RetryCallState) -> None:
        assert state.outcome is not None
        assert state.next_action is not None
        on_wait(state.outcome.result(), state.next_action.sleep)

    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_result(lambda reply: reply.get("type") == "error"),
        stop=lambda state: delay(state) is None,
        wait=lambda state: delay(state) or 0.0,
        before_sleep=announce,
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
    )
    reply: Frame = await retrying(send)
    return reply
