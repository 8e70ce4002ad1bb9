"""How many times decision waits for Redis in one Finalize cycle (a wait is a round trip, a
pipeline's commands included), its appends to the streams included: each one is latency on
the user's answer, so a change that adds one should be a choice, not an accident. On a real
Redis, scripted LLM."""

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
    ActionSpec,
    CycleEnded,
    Envelope,
    UserMessageReceived,
)
from memoria_contracts.streams import Stream
from memoria_decision.cycle import CycleEngine
from memoria_llm.scripted import ScriptRule
from memoria_runtime import catalog, keys
from memoria_runtime.bus import EventPublisher, create_broker
from memoria_runtime.bus.signing import Signer
from memoria_runtime.envelopes import follow
from memoria_runtime.settings import Settings

# open (state, lock, pending) · new state + catalog + the echo · "Thinking…" status ·
# decision's writes + the action request
START_ROUND_TRIPS = 4
# the state · end mark, state, usage · the end announcement · announced state + release
END_ROUND_TRIPS = 4


class WritingPublisher(RecordingPublisher):
    """Appends to the streams for real (so its round trips count) and keeps what it sent."""

    def __init__(self, redis_url: str) -> None:
        super().__init__()
        settings = Settings(_env_file=None, redis_url=redis_url)
        self._real = EventPublisher(create_broker(settings), settings, Signer("test secret"))
        for stream in (Stream.CHAT_OUT, Stream.ACTIONS):
            self._real.declare(stream, "decision's output")

    async def publish(self, stream: Stream, event: Envelope) -> None:
        await super().publish(stream, event)
        await self._real.publish(stream, event)

    async def queue(self, pipe: Any, stream: Stream, event: Envelope) -> None:
        await super().queue(pipe, stream, event)
        await self._real.queue(pipe, stream, event)


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


async def test_a_finalize_cycle_waits_for_redis_eight_times(
    redis: Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    publisher = WritingPublisher(redis_url)
    engine = scripted_engine(redis, publisher)
    for n in (1, 2):  # the first cycle loads the scripts
        await cycle(engine, publisher, redis, n, monkeypatch)


async def cycle(
    engine: CycleEngine,
    publisher: WritingPublisher,
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
    # What was appended is what the cycle said, in its order.
    assert await redis.xlen(Stream.CHAT_OUT.value) == len(publisher.on(Stream.CHAT_OUT))


SEARCH = ActionSpec(name="MemorySearch", description="Look in the memories.", ends_cycle=False)
# the state · the step's call and result · the step saved + "Thinking…" · the next
# decision's writes + its request
NEXT_STEP_ROUND_TRIPS = 4


async def test_a_step_leads_to_the_next_decision_in_four_round_trips(
    redis: Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await catalog.advertise(redis, "worker-1", [SEARCH, FINALIZE], ttl_s=60)
    publisher = WritingPublisher(redis_url)
    engine = scripted_engine(
        redis, publisher, rules=[ScriptRule(decide=["MemorySearch", "Finalize"])]
    )
    for n in (1, 2):  # the first cycle loads the scripts
        thread_id, message_id = f"t{n}", f"msg_nextstep{n}"
        await redis.set(keys.thread_lock("ana", thread_id), message_id)
        message = UserMessageReceived(message_id=message_id, content="what do I like?")
        await engine.on_user_message(
            Envelope(user_id="ana", thread_id=thread_id, payload=message), message, b"framed"
        )
        search = [e for s, e in publisher.sent if isinstance(e.payload, ActionRequested)][-1]
        done = ActionCompleted(
            step=1,
            action="MemorySearch",
            outcome=ActionOutcome(
                status="ok", ends_cycle=False, summary="found 1", arguments={"q": "likes"}
            ),
            worker="worker-1",
        )
        with round_trips(monkeypatch) as sent:
            await engine.on_action_completed(follow(search, done), done)
        assert n == 1 or sent[0] == NEXT_STEP_ROUND_TRIPS

        after = [e.payload for s, e in publisher.sent][-4:]
        assert [type(p).__name__ for p in after] == [
            "ChatPosted",  # the step's call, with its arguments
            "ChatPosted",  # its result
            "ChatPosted",  # "Thinking…"
            "ActionRequested",  # (a Finalize step is not kept as a call)
        ]
        assert isinstance(after[-1], ActionRequested) and after[-1].action == "Finalize"
        assert await redis.zscore(keys.STEP_DEADLINES, f"{search.cycle_id}|1") is None
        assert await redis.xlen(Stream.CHAT_OUT.value) == len(publisher.on(Stream.CHAT_OUT))
