"""How many times decision waits for Redis in one Finalize cycle (a wait is a round trip, a
pipeline's commands included): each one is latency on the user's answer, so a change that
adds one should be a choice, not an accident. On a real Redis, scripted LLM."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from in_process_bus import FINALIZE, RecordingPublisher, scripted_engine
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection

from memoria_contracts.events import (
    ActionCompleted,
    ActionOutcome,
    ActionRequested,
    CycleEnded,
    Envelope,
    UserMessageReceived,
)
from memoria_decision.cycle import CycleEngine
from memoria_runtime import catalog, keys
from memoria_runtime.envelopes import follow

START_ROUND_TRIPS = 3  # open (state, lock, pending) · new state + catalog · decision's writes
END_ROUND_TRIPS = 3  # the state · end mark, state, usage · announced state + release


@contextmanager
def round_trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts what is sent to Redis: one packet per command, or per pipeline."""
    sent = [0]
    send = AbstractConnection.send_packed_command

    async def counting(self: AbstractConnection, *args: Any, **kwargs: Any) -> None:
        sent[0] += 1
        await send(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(AbstractConnection, "send_packed_command", counting)
        yield sent


async def test_a_finalize_cycle_waits_for_redis_six_times(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    publisher = RecordingPublisher()
    engine = scripted_engine(redis, publisher)
    for n in (1, 2):  # the first cycle loads the scripts
        await cycle(engine, publisher, redis, n, monkeypatch)


async def cycle(
    engine: CycleEngine,
    publisher: RecordingPublisher,
    redis: Redis,
    n: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    thread_id, message_id = f"t{n}", f"msg_roundtrips{n}"
    await redis.set(keys.thread_lock("ana", thread_id), message_id)  # as the gateway does
    message = UserMessageReceived(message_id=message_id, content="hi there")
    event = Envelope(user_id="ana", thread_id=thread_id, payload=message)
    with round_trips(monkeypatch) as sent:
        await engine.on_user_message(event, message, b"framed")
    assert n == 1 or sent[0] == START_ROUND_TRIPS

    requested = [e for s, e in publisher.sent if isinstance(e.payload, ActionRequested)][-1]
    done = ActionCompleted(
        step=1,
        action="Finalize",
        outcome=ActionOutcome(status="ok", ends_cycle=True, summary="answered the user"),
        worker="worker-1",
    )
    with round_trips(monkeypatch) as sent:
        await engine.on_action_completed(follow(requested, done), done)
    assert n == 1 or sent[0] == END_ROUND_TRIPS

    ended = [e.payload for _, e in publisher.sent if isinstance(e.payload, CycleEnded)]
    assert [e.reason for e in ended][-1:] == ["done"]
    assert await redis.get(keys.thread_lock("ana", thread_id)) is None  # released
    assert await redis.zcard(keys.STEP_DEADLINES) == 0
