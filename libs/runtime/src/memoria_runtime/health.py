"""Liveness and readiness of one service process, as orchestrators ask for them.

* **live**: the event loop still turns. A loop blocked for ``stall_after_s`` (a deadlock, a
  runaway synchronous call) is what a restart cures; a broker outage is not, so liveness never
  looks at the broker.
* **ready**: the service has started serving (its stores are open, its subscriptions run), the
  broker answered a ping recently, and it is not shutting down.

A heartbeat task on the event loop feeds both; the ops server (:mod:`memoria_runtime.ops`)
reads them from its own thread, which is why the state is a few plain floats.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("memoria.health")

BEAT_S = 2.0
STALL_AFTER_S = 30.0
"""A loop that has not ticked for this long is stuck: far above any healthy pause."""
BROKER_STALE_AFTER_S = 10.0
"""Readiness is lost when the broker has not answered a ping for this long."""
PING_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Verdict:
    ok: bool
    status: str
    detail: dict[str, float | str | None]


class Health:
    def __init__(
        self,
        *,
        stall_after_s: float = STALL_AFTER_S,
        broker_stale_after_s: float = BROKER_STALE_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stall_after_s = stall_after_s
        self._broker_stale_after_s = broker_stale_after_s
        self._clock = clock
        self._serving_since: float | None = None
        self._stopping = False
        self._last_tick: float | None = None
        self._last_broker_ok: float | None = None
        self._broker_error: str | None = None

    # -- what the event loop reports ---------------------------------------------------------

    def serving(self) -> None:
        self._serving_since = self._last_tick = self._clock()

    def stopping(self) -> None:
        self._stopping = True

    def tick(self) -> None:
        self._last_tick = self._clock()

    def broker_ok(self) -> None:
        self._last_broker_ok = self._clock()
        self._broker_error = None

    def broker_failed(self, error: str) -> None:
        self._broker_error = error

    # -- what the ops server answers ---------------------------------------------------------

    def live(self) -> Verdict:
        if self._serving_since is None or self._last_tick is None:
            # Starting (loading a model, opening stores): the startup probe's business.
            return Verdict(True, "starting", {})
        stalled_for = self._clock() - self._last_tick
        if stalled_for > self._stall_after_s:
            return Verdict(False, "event loop stalled", {"seconds": round(stalled_for, 1)})
        return Verdict(True, "ok", {})

    def ready(self) -> Verdict:
        if self._stopping:
            return Verdict(False, "stopping", {})
        if self._serving_since is None:
            return Verdict(False, "starting", {})
        live = self.live()
        if not live.ok:
            return live
        now = self._clock()
        if self._last_broker_ok is None or now - self._last_broker_ok > self._broker_stale_after_s:
            since = None if self._last_broker_ok is None else round(now - self._last_broker_ok, 1)
            return Verdict(
                False,
                "broker unreachable",
                {"last_ok_seconds_ago": since, "error": self._broker_error},
            )
        return Verdict(True, "ok", {})


async def heartbeat(
    health: Health, ping: Callable[[], Awaitable[object]], *, beat_s: float = BEAT_S
) -> None:
    """Tick and ping the broker every ``beat_s`` until cancelled."""
    while True:
        health.tick()
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                await ping()
        except Exception as exc:  # any failure to answer is "unreachable"
            health.broker_failed(f"{type(exc).__name__}: {exc}")
        else:
            health.broker_ok()
        await asyncio.sleep(beat_s)


async def stop_task(task: asyncio.Task[Any]) -> None:
    """Cancel a background loop and wait for it. One that had already died of an error is
    logged, not raised: stopping the rest of the process must go on."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception:
        log.exception("%s had failed before it was stopped", task.get_name())
