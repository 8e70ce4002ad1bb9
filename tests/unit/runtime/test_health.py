"""Liveness and readiness verdicts, and the heartbeat that feeds them."""

from __future__ import annotations

import asyncio

import pytest

from memoria_runtime.health import Health, Verdict, heartbeat, stop_task


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


async def test_a_loop_that_ignores_its_cancellation_does_not_hang_the_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What a client library swallowing a cancellation looks like: the stop goes on after its
    bound, and the log names the loop and the line it waits on."""
    stubborn = True
    cancellations = 0

    async def hold_on() -> None:
        await asyncio.sleep(3600)

    async def swallow_cancellations() -> None:
        nonlocal cancellations
        while True:
            try:
                await hold_on()
            except asyncio.CancelledError:
                cancellations += 1
                if not stubborn:
                    raise

    task = asyncio.create_task(swallow_cancellations(), name="stubborn reader")
    await asyncio.sleep(0)
    try:
        async with asyncio.timeout(5):
            await stop_task(task, wait_s=0.05)
        assert cancellations == 1 and not task.done()
        [record] = [r for r in caplog.records if "did not stop" in r.getMessage()]
        assert "stubborn reader" in record.getMessage()
        # The innermost await outside asyncio, not the task's own frame nor asyncio.sleep.
        assert "in hold_on" in record.getMessage()
    finally:
        stubborn = False  # else the stubborn loop outlives the test and hangs the loop's close
        await stop_task(task)
    assert task.cancelled()


async def test_a_loop_that_had_failed_is_logged_and_the_stop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fail() -> None:
        raise RuntimeError("lost the connection")

    task = asyncio.create_task(fail(), name="failed reader")
    await asyncio.sleep(0)
    await stop_task(task)
    [record] = [r for r in caplog.records if "had failed" in r.getMessage()]
    assert "failed reader" in record.getMessage()
    assert record.exc_info is not None and "lost the connection" in str(record.exc_info[1])


async def test_stopping_is_itself_cancellable() -> None:
    """A stop cancelled from outside (a second Ctrl+C) ends the stop, not only the loop."""

    async def slow_to_unwind() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.shield(asyncio.sleep(0.5))

    loop_task = asyncio.create_task(slow_to_unwind())
    await asyncio.sleep(0)
    stopping = asyncio.create_task(stop_task(loop_task))
    await asyncio.sleep(0.05)
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    await asyncio.wait({loop_task}, timeout=2)


def test_a_part_that_says_it_cannot_work_costs_readiness_until_it_can(health: Health) -> None:
    problem: list[Verdict] = []
    health.add_check(lambda: problem[0] if problem else None)
    health.serving()
    health.broker_ok()
    assert health.ready().ok
    problem.append(Verdict(False, "storage full", {"since_seconds": 3.0}))
    verdict = health.ready()
    assert (verdict.ok, verdict.status, verdict.detail) == (
        False,
        "storage full",
        {"since_seconds": 3.0},
    )
    assert health.live().ok  # a full disk is not cured by a restart
    problem.clear()
    assert health.ready().ok
