"""Liveness and readiness verdicts, and the heartbeat that feeds them."""

from __future__ import annotations

import asyncio

import pytest

from memoria_runtime.health import Health, heartbeat, stop_task


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def health(clock: Clock) -> Health:
    return Health(stall_after_s=30, broker_stale_after_s=10, clock=clock)


def test_a_starting_service_is_live_but_not_ready(health: Health) -> None:
    assert health.live().ok
    verdict = health.ready()
    assert not verdict.ok and verdict.status == "starting"


def test_serving_with_a_broker_that_answers_is_ready(health: Health) -> None:
    health.serving()
    assert not health.ready().ok  # no ping answered yet
    health.broker_ok()
    assert health.ready().ok and health.live().ok


def test_a_stalled_event_loop_is_not_live(health: Health, clock: Clock) -> None:
    health.serving()
    health.broker_ok()
    clock.now += 31
    live = health.live()
    assert not live.ok and live.status == "event loop stalled" and live.detail["seconds"] == 31
    assert not health.ready().ok


def test_a_broker_outage_costs_readiness_never_liveness(health: Health, clock: Clock) -> None:
    health.serving()
    health.broker_ok()
    for _ in range(6):  # the loop keeps ticking, the broker stops answering
        clock.now += 2
        health.tick()
        health.broker_failed("ConnectionError: refused")
    ready = health.ready()
    assert not ready.ok and ready.status == "broker unreachable"
    assert ready.detail["error"] == "ConnectionError: refused"
    assert health.live().ok
    health.broker_ok()
    assert health.ready().ok


def test_a_stopping_service_is_not_ready(health: Health) -> None:
    health.serving()
    health.broker_ok()
    health.stopping()
    assert health.ready().status == "stopping"
    assert health.live().ok


async def test_heartbeat_records_answers_and_failures() -> None:
    health = Health()
    answers = [True, False, True]
    pings = 0

    async def ping() -> None:
        nonlocal pings
        pings += 1
        if not answers[min(pings - 1, len(answers) - 1)]:
            raise ConnectionError("broker down")

    health.serving()
    task = asyncio.create_task(heartbeat(health, ping, beat_s=0.01))
    async with asyncio.timeout(5):
        while pings < 2:
            await asyncio.sleep(0.005)
        assert health.ready().ok  # the first ping answered; one failure is not yet an outage
        while pings < 4:
            await asyncio.sleep(0.005)
    await stop_task(task)
    assert task.cancelled()
    assert health.ready().ok and health.live().ok
