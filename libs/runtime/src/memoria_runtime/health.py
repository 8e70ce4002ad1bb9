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
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

_ASYNCIO_DIR = os.path.dirname(asyncio.__file__) + os.sep

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


ReadinessCheck = Callable[[], "Verdict | None"]


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
        self._checks: list[ReadinessCheck] = []

    def add_check(self, check: ReadinessCheck) -> None:
        """A part of the service that can make it unready (a full disk under its stores):
        ``check()`` returns the verdict to answer, or None when the part is fine. Called
        from the ops server's thread: it must only read state."""
        self._checks.append(check)

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
        for check in self._checks:
            verdict = check()
            if verdict is not None and not verdict.ok:
                return verdict
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


STOP_WAIT_S = 5.0
"""How long a stop waits for a cancelled loop: far above the few milliseconds a healthy one
takes to unwind."""


async def stop_task(task: asyncio.Task[Any], *, wait_s: float = STOP_WAIT_S) -> None:
    """Cancel a background loop and wait for it to end, for ``wait_s`` at most.

    One that had already died of an error is logged, not raised: stopping the rest of the
    process must go on. One still running after ``wait_s`` is logged with where it waits and
    left behind: a client library that swallows a cancellation (redis-py has had several such
    bugs) would otherwise hang the whole stop, with nothing saying which loop held it.
    """
    task.cancel()
    # asyncio.wait, not ``await task``: it bounds the wait, and a cancellation of the caller
    # itself still reaches the caller instead of being taken for the loop's.
    done, _ = await asyncio.wait({task}, timeout=wait_s)
    if not done:
        log.warning(
            "%s did not stop within %g s of being cancelled; left behind, waiting at %s",
            task.get_name(),
            wait_s,
            waiting_at(task),
        )
        return
    if task.cancelled():
        return
    failure = task.exception()
    if failure is not None:
        log.error("%s had failed before it was stopped", task.get_name(), exc_info=failure)


def waiting_at(task: asyncio.Task[Any]) -> str:
    """The innermost line outside asyncio that a suspended task waits on, as
    ``file:line in function``.

    ``Task.get_stack`` stops at the task's own coroutine; the await chain goes deeper, into
    the library call that holds it. asyncio's own frames (a sleep, a stream's wait for data)
    are left out: every stuck loop ends in one of those, so they name nothing."""
    frame = None
    awaited: Any = task.get_coro()
    while awaited is not None:
        inner = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if inner is None:
            break
        if not inner.f_code.co_filename.startswith(_ASYNCIO_DIR):
            frame = inner
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    if frame is None:
        return "an unknown point"
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
