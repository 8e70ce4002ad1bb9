"""The cycle's executor (``memoria_decision.executor``, its writes held and sent together by
``memoria_decision.batch``) is the one part of decision that knows Redis: how many times it
waits for it per event (see ``round_trips``). The core it carries out is tested without
Redis (tests/unit/decision/test_core.py). On a real Redis, scripted LLM."""

from __future__ import annotations

import pytest
from in_process_bus import FINALIZE, scripted_engine
from redis.asyncio import Redis
from round_trips import WritingPublisher, round_trips

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
from memoria_decision.executor import CycleExecutor
from memoria_llm.scripted import ScriptRule
from memoria_runtime import catalog, keys
from memoria_runtime.envelopes import follow
from memoria_runtime.partitions import Partitions

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

DECISION_STREAMS = (Stream.CHAT_OUT, Stream.ACTIONS)
# open (state, lock, pending) · create (the new state) · the echo, "Thinking…" and the
# catalog read · the decision's writes and the action request
START_BATCHES = 4
# the state · the end's writes and the announcement · the release (with the tombstone)
END_BATCHES = 3


async def test_a_finalize_cycle_takes_four_batches_to_start_and_three_to_end(
    redis: Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await catalog.advertise(redis, "worker-1", [FINALIZE], ttl_s=60)
    publisher = WritingPublisher(redis_url, DECISION_STREAMS)
    engine = scripted_engine(redis, publisher)
    for n in (1, 2):  # the first cycle loads the scripts
        await cycle(engine, publisher, redis, n, monkeypatch)


async def cycle(
    engine: CycleExecutor,
    publisher: WritingPublisher,
    redis: Redis,
    n: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    thread_id, message_id = f"t{n}", f"msg_roundtrips{n}"
    await redis.set(keys.thread_lock(ONE, "ana", thread_id), message_id)  # as the gateway does
    message = UserMessageReceived(message_id=message_id, content="hi there")
    event = Envelope(user_id="ana", thread_id=thread_id, payload=message)
    with round_trips(monkeypatch) as sent:
        await engine.on_user_message(event, message, b"framed")
    assert n == 1 or sent[0] == START_BATCHES

    requested = [e for s, e in publisher.sent if isinstance(e.payload, ActionRequested)][-1]
    done = ActionCompleted(
        step=1,
        action="Finalize",
        outcome=ActionOutcome(status="ok", ends_cycle=True, summary="answered the user"),
        worker="worker-1",
    )
    with round_trips(monkeypatch) as sent:
        await engine.on_action_completed(follow(requested, done), done)
    assert n == 1 or sent[0] == END_BATCHES

    ended = [e.payload for _, e in publisher.sent if isinstance(e.payload, CycleEnded)]
    assert [e.reason for e in ended][-1:] == ["done"]
    assert await redis.get(keys.thread_lock(ONE, "ana", thread_id)) is None  # released
    assert await redis.zcard(keys.step_deadlines(ONE)) == 0
    # What was appended is what the cycle said, in its order.
    assert await redis.xlen(Stream.CHAT_OUT.value) == len(publisher.on(Stream.CHAT_OUT))


SEARCH = ActionSpec(name="MemorySearch", description="Look in the memories.", ends_cycle=False)
# the state · the step's call and result records, the step saved, "Thinking…" and the
# catalog read · the next decision's writes and its request
NEXT_STEP_BATCHES = 3


async def test_a_step_leads_to_the_next_decision_in_three_batches(
    redis: Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await catalog.advertise(redis, "worker-1", [SEARCH, FINALIZE], ttl_s=60)
    publisher = WritingPublisher(redis_url, DECISION_STREAMS)
    engine = scripted_engine(
        redis, publisher, rules=[ScriptRule(decide=["MemorySearch", "Finalize"])]
    )
    for n in (1, 2):  # the first cycle loads the scripts
        thread_id, message_id = f"t{n}", f"msg_nextstep{n}"
        await redis.set(keys.thread_lock(ONE, "ana", thread_id), message_id)
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
        assert n == 1 or sent[0] == NEXT_STEP_BATCHES

        after = [e.payload for s, e in publisher.sent][-4:]
        assert [type(p).__name__ for p in after] == [
            "ChatPosted",  # the step's call, with its arguments
            "ChatPosted",  # its result
            "ChatPosted",  # "Thinking…"
            "ActionRequested",  # (a Finalize step is not kept as a call)
        ]
        assert isinstance(after[-1], ActionRequested) and after[-1].action == "Finalize"
        assert await redis.zscore(keys.step_deadlines(ONE), f"{search.cycle_id}|1") is None
        assert await redis.xlen(Stream.CHAT_OUT.value) == len(publisher.on(Stream.CHAT_OUT))
