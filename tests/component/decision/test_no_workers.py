"""A cycle that finds no worker waits a moment for one (services start in any order; a lone
worker restarts in seconds) before it ends with the `no_workers` notice."""

from __future__ import annotations

import asyncio

from in_process_bus import FINALIZE, RecordingPublisher, scripted_engine
from redis.asyncio import Redis

from memoria_contracts.events import (
    ActionRequested,
    ChatPosted,
    CycleEnded,
    Envelope,
    UserMessageReceived,
)
from memoria_contracts.streams import Stream
from memoria_decision.executor import CycleExecutor
from memoria_runtime import catalog
from memoria_runtime.settings import Settings
from memoria_text import i18n

WORKER_LATE_S = 0.6


def engine_waiting(redis: Redis, publisher: RecordingPublisher, seconds: float) -> CycleExecutor:
    return scripted_engine(
        redis, publisher, settings=Settings.load(_env_file=None, no_workers_wait_seconds=seconds)
    )


async def start_cycle(engine: CycleExecutor) -> None:
    message = UserMessageReceived(message_id="msg_early1", content="hello, anyone there?")
    event = Envelope(user_id="ana", thread_id="t1", payload=message)
    await engine.on_user_message(event, message, b"framed")


async def test_a_worker_that_comes_within_the_wait_runs_the_cycle(redis: Redis) -> None:
    publisher = RecordingPublisher()
    cycle = asyncio.create_task(start_cycle(engine_waiting(redis, publisher, 10.0)))
    await asyncio.sleep(WORKER_LATE_S)
    assert not cycle.done(), "the cycle gave up before the worker came"
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    await asyncio.wait_for(cycle, 10.0)

    (request,) = publisher.on(Stream.ACTIONS)
    assert isinstance(request.payload, ActionRequested)
    assert request.payload.action == "Finalize"
    assert publisher.ends() == []


async def test_without_a_worker_the_cycle_ends_with_the_notice_after_the_wait(
    redis: Redis,
) -> None:
    publisher = RecordingPublisher()
    await asyncio.wait_for(start_cycle(engine_waiting(redis, publisher, 0.5)), 10.0)

    [ended] = publisher.ends()
    assert isinstance(ended, CycleEnded) and ended.reason == "no_workers"
    said = [
        e.payload.message.content
        for e in publisher.on(Stream.CHAT_OUT)
        if isinstance(e.payload, ChatPosted)
    ]
    assert said[-1] == i18n.text("no_workers", "en")
    assert publisher.on(Stream.ACTIONS) == []
