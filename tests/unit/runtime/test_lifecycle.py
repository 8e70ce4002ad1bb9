"""The one service lifecycle: parts start in order and stop last first, a failed start
stops what had started, every stop runs, background loops end with the bounded stop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from memoria_runtime.lifecycle import Lifecycle


def _step(log: list[str], name: str, *, fail: bool = False) -> Callable[[], Awaitable[None]]:
    async def step() -> None:
        log.append(name)
        if fail:
            raise RuntimeError(name)

    return step


async def test_parts_start_in_order_and_stop_last_first() -> None:
    log: list[str] = []
    inner = Lifecycle()
    inner.add(_step(log, "start broker"), _step(log, "stop broker"))
    outer = Lifecycle()
    outer.add(_step(log, "start storage"), _step(log, "close storage"))
    outer.include(inner)
    outer.add(_step(log, "serving"), _step(log, "stopping"))
    await outer.start()
    await outer.stop()
    assert log == [
        "start storage",
        "start broker",
        "serving",
        "stopping",
        "stop broker",
        "close storage",
    ]


async def test_a_failed_start_stops_what_had_started_and_says_why() -> None:
    log: list[str] = []
    lifecycle = Lifecycle()
    lifecycle.add(_step(log, "open"), _step(log, "close"))
    lifecycle.add(_step(log, "check key", fail=True), _step(log, "never started"))
    lifecycle.add(_step(log, "not reached"))
    with pytest.raises(RuntimeError, match="check key"):
        await lifecycle.start()
    assert log == ["open", "check key", "close"]
    await lifecycle.stop()  # nothing left to stop
    assert log == ["open", "check key", "close"]


async def test_every_stop_runs_when_one_fails() -> None:
    log: list[str] = []
    lifecycle = Lifecycle()
    lifecycle.add(stop=_step(log, "first"))
    lifecycle.add(stop=_step(log, "second", fail=True))
    await lifecycle.start()
    with pytest.raises(RuntimeError, match="second"):
        await lifecycle.stop()
    assert log == ["second", "first"]


async def test_a_background_loop_runs_while_started_and_is_stopped() -> None:
    ticks: list[int] = []

    async def tick_forever() -> None:
        while True:
            ticks.append(1)
            await asyncio.sleep(0)

    lifecycle = Lifecycle()
    lifecycle.add_task(tick_forever)
    await lifecycle.start()
    await asyncio.sleep(0.01)
    await lifecycle.stop()
    counted = len(ticks)
    await asyncio.sleep(0.01)
    assert counted > 0 and len(ticks) == counted  # ran, then stopped for good


async def test_a_second_start_is_refused() -> None:
    lifecycle = Lifecycle()
    await lifecycle.start()
    with pytest.raises(RuntimeError, match="already started"):
        await lifecycle.start()
    await lifecycle.stop()


def test_an_included_parts_readiness_checks_come_along() -> None:
    def check() -> None:
        return None

    own = Lifecycle()
    own.add_readiness_check(check)
    outer = Lifecycle()
    outer.include(own)
    assert outer.readiness_checks == [check]
