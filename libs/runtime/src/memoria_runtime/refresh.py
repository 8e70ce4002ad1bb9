"""Keep a short-lived record in Redis alive: write it every round, and after a failed write
(the broker restarting) try again within a second instead of a round later.

Used for a worker's advert in the action catalog and for a service's presence: both expire
unless refreshed, so two failed rounds in a row would make a live process look gone
(docs/chaos.md, bug 7: after broker restarts, every cycle ended ``no_workers`` for seconds).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

import tenacity

log = logging.getLogger("memoria.refresh")

REFRESHES_PER_TTL: Final = 3  # three writes per lifetime: one lost write is fine
# The first retry comes this soon, doubling up to RETRY_MAX_S (with up to RETRY_FIRST_S of
# jitter, so replicas do not retry in step). A write is one HSET: retrying is cheap.
RETRY_FIRST_S: Final = 0.1
RETRY_MAX_S: Final = 1.0


async def keep_refreshed(write: Callable[[], Awaitable[None]], *, ttl_s: float, what: str) -> None:
    """Run ``write`` ``REFRESHES_PER_TTL`` times per ``ttl_s`` until cancelled, retrying a
    failed write soon; a write that has not finished within a round counts as failed.
    ``what`` names the record in the log."""
    period = ttl_s / REFRESHES_PER_TTL
    retrying = tenacity.AsyncRetrying(
        wait=tenacity.wait_exponential_jitter(
            initial=RETRY_FIRST_S, max=min(RETRY_MAX_S, period), jitter=RETRY_FIRST_S
        ),
        retry=tenacity.retry_if_exception_type(Exception),
        before_sleep=lambda state: _first_failure(state, what),
        reraise=True,
    )
    while True:
        async for attempt in retrying:
            with attempt:
                # On a connection whose peer vanished without a reset, a command waits until
                # TCP keepalive gives up (redis_clients.py, ~19 s); a round may be sooner.
                async with asyncio.timeout(period):
                    await write()
        failed = retrying.statistics["attempt_number"] - 1
        if failed:
            log.info("wrote %s again, after %d failed attempts", what, failed)
        await asyncio.sleep(period)


def _first_failure(state: tenacity.RetryCallState, what: str) -> None:
    """Log the first failure of a run with its cause; one line per retry would flood the log
    while the broker is away."""
    if state.attempt_number == 1 and state.outcome is not None:
        log.warning("could not write %s; trying again", what, exc_info=state.outcome.exception())
