"""The bus split into partitions, on one real server: each user's events go to the user's
partition, a consumer group reads every partition with one blocking read, and the thread
gate's scripts work within a partition."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from redis.asyncio import Redis

from memoria_contracts.events import Envelope, UserMessageReceived
from memoria_contracts.streams import Group, Stream
from memoria_runtime import keys
from memoria_runtime.bus import Delivery, ServiceBus
from memoria_runtime.bus.layout import LayoutMismatch, ensure_same_layout
from memoria_runtime.bus.thread_gate import ThreadGate
from memoria_runtime.partitions import Partitions
from tests.component.runtime.test_bus import eventually, settings_for, start

PARTITIONS = 4
USERS = [f"user-{n}" for n in range(24)]


@pytest.fixture
async def running() -> AsyncIterator[list[ServiceBus]]:
    brokers: list[ServiceBus] = []
    yield brokers
    for broker in brokers:
        await broker.stop()


def message(user_id: str, text: str) -> Envelope:
    return Envelope(
        user_id=user_id,
        thread_id="t1",
        payload=UserMessageReceived(message_id=f"m-{user_id}-{text}", content=text),
    )


def spread(partitions: Partitions) -> dict[int, list[str]]:
    by_partition: dict[int, list[str]] = {}
    for user in USERS:
        by_partition.setdefault(partitions.of(user).index, []).append(user)
    return by_partition


async def test_events_go_to_their_users_partition_and_one_consumer_reads_them_all(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    settings = settings_for(redis_url, bus_partitions=PARTITIONS)
    partitions = settings.bus.partitions
    assert len(spread(partitions)) == PARTITIONS  # every partition has users
    seen: list[tuple[str, str]] = []

    async def handler(event: Envelope, delivery: Delivery) -> None:
        assert delivery.stream == Stream.CHAT_IN.value  # the stream, not its partition
        seen.append((event.user_id, cast(UserMessageReceived, event.payload).content))

    publisher = await start(running, settings, handler, Stream.CHAT_IN)
    for user in USERS:
        await publisher.publish(Stream.CHAT_IN, message(user, "hi"))

    await eventually(lambda: len(seen) == len(USERS))
    assert sorted(seen) == sorted((user, "hi") for user in USERS)
    for part in partitions.all:
        stream = part.scoped(Stream.CHAT_IN.value)
        written = cast("list[Any]", await redis.xrange(stream))
        assert len(written) == len(spread(partitions)[part.index])
        summary = await redis.xpending(stream, Group.DECISION.value)
        assert summary["pending"] == 0  # each acknowledged in its own partition
    assert not await redis.exists(Stream.CHAT_IN.value)  # nothing in the unsplit stream


async def test_one_read_waits_on_every_partition(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    """An idle consumer of four partitions blocks in one XREADGROUP, not one per partition
    in turn (no busy polling)."""
    settings = settings_for(redis_url, bus_partitions=PARTITIONS)
    await start(running, settings, lambda *_: None, Stream.ACTIONS, group=Group.ACTION_WORKER)
    await asyncio.sleep(0.3)
    blocked = [
        client
        for client in await redis.client_list()
        if client.get("cmd") == "xreadgroup" and client.get("flags", "").find("b") != -1
    ]
    assert len(blocked) == 1
    before = (await redis.info("commandstats"))["cmdstat_xreadgroup"]["calls"]
    await asyncio.sleep(1.0)  # shorter than one block: no read returned, none was sent
    assert (await redis.info("commandstats"))["cmdstat_xreadgroup"]["calls"] == before


async def test_entries_with_the_same_id_in_two_partitions_are_both_handled(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    settings = settings_for(redis_url, bus_partitions=PARTITIONS)
    users = [users[0] for users in spread(settings.bus.partitions).values()][:2]
    publisher = await start(running, settings, lambda *_: None, Stream.CHAT_IN)
    await running[0].stop()
    running.clear()
    for user in users:  # the same id in two partitions
        key = settings.bus.partitions.of(user).scoped(Stream.CHAT_IN.value)
        framed = await publisher._framed(Stream.CHAT_IN, message(user, "same id"))
        await redis.xadd(key, {"__data__": framed}, id="1-1")
    seen: list[str] = []

    async def handler(event: Envelope, delivery: Delivery) -> None:
        seen.append(event.user_id)

    await start(running, settings, handler, Stream.CHAT_IN)
    await eventually(lambda: len(seen) == 2)
    assert sorted(seen) == sorted(users)


async def test_a_failed_entry_is_reclaimed_in_its_partition(
    redis: Redis, redis_url: str, running: list[ServiceBus]
) -> None:
    settings = settings_for(redis_url, bus_partitions=PARTITIONS)
    attempts: list[bool] = []

    async def handler(event: Envelope, delivery: Delivery) -> None:
        attempts.append(delivery.redelivered)
        if len(attempts) == 1:
            raise RuntimeError("first try fails")

    publisher = await start(running, settings, handler, Stream.CHAT_IN)
    await publisher.publish(Stream.CHAT_IN, message(USERS[5], "retry me"))
    await eventually(lambda: attempts == [False, True])


async def test_the_gate_appends_to_the_threads_partition(redis: Redis) -> None:
    partitions = Partitions(PARTITIONS)
    gate = ThreadGate(redis, lock_ttl_s=60, stream_maxlen=1000, partitions=partitions)
    user = USERS[3]
    part = partitions.of(user)

    assert (await gate.admit(user, "t1", "m1", b"frame-1")).outcome == "dispatched"
    assert (await gate.admit(user, "t1", "m2", b"frame-2")).outcome == "queued"
    assert await redis.get(keys.thread_lock(part, user, "t1")) == b"m1"
    assert await gate.release(user, "t1", "m1") == "m2"

    chat_in = cast("list[Any]", await redis.xrange(part.scoped(Stream.CHAT_IN.value)))
    assert [fields[b"__data__"] for _, fields in chat_in] == [b"frame-1", b"frame-2"]
    groups = await redis.xinfo_groups(part.scoped(Stream.CHAT_IN.value))
    assert {g["name"].decode() for g in groups} == {
        Group.DECISION.value,
        Group.MEMORY_TRACE.value,
    }


async def test_a_service_with_another_layout_refuses_to_start(redis: Redis) -> None:
    mine = settings_for("redis://unused", bus_partitions=PARTITIONS).bus.bus_layout
    assert mine == "partitions=4;tagged=1;fanout=routed"
    await ensure_same_layout(redis, mine)
    await ensure_same_layout(redis, mine)  # the same: fine
    for other in (
        settings_for("redis://unused", bus_partitions=2),
        settings_for("redis://unused"),
        settings_for("redis://unused", bus_partitions=PARTITIONS, fan_out="broadcast"),
    ):
        with pytest.raises(LayoutMismatch, match="partitions=4") as refused:
            await ensure_same_layout(redis, other.bus.bus_layout)
    assert "memoria:bus:layout" in str(refused.value)
