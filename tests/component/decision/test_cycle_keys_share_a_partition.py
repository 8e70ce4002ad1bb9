"""On a partitioned bus, every key a thread's cycles write is in its user's partition, under
the partition's hash tag, so that the thread gate's scripts and each pipeline of a step stay
on one cluster slot (``memoria_runtime.partitions``). What is written is seen as the server
reports it (keyspace notifications): a model cycle of two steps ending in its tombstone, and
a fast path that asks for a confirmation and acts on the answer. On a real Redis, scripted
LLM."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from in_process_bus import FINALIZE, RecordingPublisher, scripted_engine
from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from memoria_contracts.cycles import cycle_id_for
from memoria_contracts.events import (
    ActionCompleted,
    ActionOutcome,
    ActionRequested,
    ActionSpec,
    Envelope,
    UserMessageReceived,
)
from memoria_decision.executor import CycleExecutor
from memoria_llm.scripted import ScriptRule
from memoria_runtime import catalog, keys
from memoria_runtime.envelopes import follow
from memoria_runtime.settings import Settings
from tests.component.decision.test_fast_path_runs import InProcessMemories

SETTINGS = Settings.load(_env_file=None, bus_partitions=4)
USER = "ana"
PART = SETTINGS.bus.partitions.of(USER)
SEARCH = ActionSpec(name="MemorySearch", description="Look in the memories.", ends_cycle=False)
LAST = "memoria:written-last"  # untagged: where the server's reports are read up to
REPORTS_WITHIN_S = 30  # generous: a loaded machine


@pytest.fixture
async def reports(redis: Redis) -> AsyncIterator[PubSub]:
    """The server's report of every key written from now on."""
    await redis.config_set("notify-keyspace-events", "KA")
    pubsub = redis.pubsub()
    await pubsub.psubscribe("__keyspace@*__:*")
    try:
        yield pubsub
    finally:
        await redis.config_set("notify-keyspace-events", "")
        await pubsub.aclose()  # type: ignore[no-untyped-call]


async def written(redis: Redis, pubsub: PubSub) -> set[str]:
    """The keys written so far: read until the report of a last write, made now."""
    await redis.set(LAST, 1)
    seen: set[str] = set()
    async with asyncio.timeout(REPORTS_WITHIN_S):
        while LAST not in seen:
            report = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1)
            if report is not None:  # None: nothing yet, or the subscription's confirmation
                seen.add(report["channel"].decode().split(":", 1)[1])
    return seen - {LAST}


async def say(engine: CycleExecutor, thread_id: str, message_id: str, text: str) -> None:
    message = UserMessageReceived(message_id=message_id, content=text)
    event = Envelope(user_id=USER, thread_id=thread_id, payload=message)
    await engine.on_user_message(event, message, b"framed")


def completed(action: str, *, ends: bool) -> ActionCompleted:
    outcome = ActionOutcome(status="ok", ends_cycle=ends, summary=f"{action} done")
    return ActionCompleted(step=1 if not ends else 2, action=action, outcome=outcome, worker="w")


async def test_every_key_a_threads_cycles_write_is_in_its_users_partition(
    redis: Redis, reports: PubSub
) -> None:
    assert PART.tag  # four partitions: every key of a thread carries a hash tag
    await catalog.advertise(redis, "w", [SEARCH, FINALIZE], 60, partitions=SETTINGS.bus.partitions)
    await written(redis, reports)  # the adverts: every partition's catalog
    publisher = RecordingPublisher()
    engine = scripted_engine(
        redis,
        publisher,
        rules=[ScriptRule(decide=["MemorySearch", "Finalize"])],
        memory=InProcessMemories({USER: ["mem_1", "mem_2"]}),
        settings=SETTINGS,
    )

    await say(engine, "t1", "msg_parts1", "what do I like?")
    cycle_id = cycle_id_for("msg_parts1")
    for action, ends in (("MemorySearch", False), ("Finalize", True)):
        request = [e for _, e in publisher.sent if isinstance(e.payload, ActionRequested)][-1]
        done = completed(action, ends=ends)
        await engine.on_action_completed(follow(request, done), done)
    await say(engine, "t2", "msg_parts2", "Delete all my memories")
    await say(engine, "t2", "msg_parts3", "yes")

    keys_written = await written(redis, reports)
    assert publisher.ends()[0].usage is not None  # read from where the worker counted it
    assert {
        keys.cycle_state(PART, cycle_id),  # running, then its tombstone
        keys.cycle_ended(PART, cycle_id),
        keys.step_deadlines(PART),
        keys.thread_lock(PART, USER, "t1"),
        keys.pending_action(PART, USER, "t2"),  # the confirmation, asked then answered
    } <= keys_written
    assert all(key.startswith(f"memoria:{PART.tag}:") for key in keys_written), keys_written
