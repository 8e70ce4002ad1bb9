"""Trimming streams by age on a real broker (bus/retention.py): acknowledged entries older
than the retention go; entries a group has not read or not acknowledged stay, however old;
the dead letters keep their days."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from memoria_contracts.streams import Group, Stream
from memoria_runtime.bus.entry_id import EntryId
from memoria_runtime.bus.retention import queue_inbox_trim, trim_all, trim_stream
from memoria_runtime.bus.topology import create_stream
from memoria_runtime.settings import BusSettings

NOW_MS = 1_800_000_000_000
RETENTION_S = 60.0
MINUTE_MS = 60_000


async def fill(redis: Redis, stream: str, minutes_ago: list[int]) -> list[str]:
    """Entries with the times given (ids are times): oldest first. Macro nodes hold up to 100
    entries, and approximate trimming removes whole nodes: each entry gets its own node here
    so the test sees exactly what is cut."""
    ids = []
    for n, minutes in enumerate(minutes_ago):
        added = await redis.xadd(stream, {"n": n}, id=f"{NOW_MS - minutes * MINUTE_MS}-{n}")
        ids.append(added.decode() if isinstance(added, bytes) else added)
    return ids


@pytest.fixture(autouse=True)
async def one_entry_per_node(redis: Redis) -> AsyncIterator[None]:
    """Approximate trimming removes whole macro nodes (100 entries by default): with one
    entry per node the test sees exactly where the cut falls."""
    await redis.config_set("stream-node-max-entries", 1)
    try:
        yield
    finally:
        await redis.config_set("stream-node-max-entries", 100)


async def remaining(redis: Redis, stream: str) -> list[str]:
    entries: Any = await redis.xrange(stream)
    return [entry_id.decode() for entry_id, _ in entries]


async def read(redis: Redis, stream: str, group: str, count: int) -> list[str]:
    reply: Any = await redis.xreadgroup(group, "c1", {stream: ">"}, count=count)
    return [entry_id.decode() for entry_id, _ in reply[0][1]]


async def test_acknowledged_entries_older_than_the_retention_go(redis: Redis) -> None:
    stream = Stream.ACTIONS.value
    await create_stream(redis, stream)
    ids = await fill(redis, stream, [10, 5, 2, 0])
    for group in (Group.ACTION_WORKER.value, Group.MEMORY_TRACE.value):
        taken = await read(redis, stream, group, 4)
        await redis.xack(stream, group, *taken)
    assert await trim_stream(redis, stream, RETENTION_S, NOW_MS) == 3
    assert await remaining(redis, stream) == ids[3:]


async def test_an_unacknowledged_entry_keeps_itself_and_everything_after_it(redis: Redis) -> None:
    stream = Stream.ACTIONS.value
    await create_stream(redis, stream)
    ids = await fill(redis, stream, [10, 5, 2, 0])
    worker, trace = Group.ACTION_WORKER.value, Group.MEMORY_TRACE.value
    taken = await read(redis, stream, worker, 4)
    await redis.xack(stream, worker, taken[0], taken[2], taken[3])  # the second stays pending
    await redis.xack(stream, trace, *await read(redis, stream, trace, 4))
    await trim_stream(redis, stream, RETENTION_S, NOW_MS)
    assert await remaining(redis, stream) == ids[1:]


async def test_entries_a_group_has_not_read_stay_however_old(redis: Redis) -> None:
    stream = Stream.CHAT_IN.value
    await create_stream(redis, stream)
    ids = await fill(redis, stream, [30, 20, 10, 0])
    decision, trace = Group.DECISION.value, Group.MEMORY_TRACE.value
    await redis.xack(stream, decision, *await read(redis, stream, decision, 4))
    await redis.xack(stream, trace, *await read(redis, stream, trace, 1))  # read one only
    await trim_stream(redis, stream, RETENTION_S, NOW_MS)
    assert await remaining(redis, stream) == ids[1:]


async def test_a_group_outside_the_contract_holds_nothing_back(redis: Redis) -> None:
    stream = Stream.MEMORY_RPC.value
    await create_stream(redis, stream)
    await redis.xgroup_create(stream, "left-by-an-old-release", id="0")
    ids = await fill(redis, stream, [10, 0])
    memory = Group.MEMORY.value
    await redis.xack(stream, memory, *await read(redis, stream, memory, 2))
    await trim_stream(redis, stream, RETENTION_S, NOW_MS)
    assert await remaining(redis, stream) == ids[1:]


async def test_dead_letters_are_kept_for_days_and_missing_streams_are_skipped(
    redis: Redis,
) -> None:
    stream = Stream.DEAD_LETTER.value
    ids = await fill(redis, stream, [3 * 24 * 60, 24 * 60, 10])
    settings = BusSettings(
        stream_retention_seconds=RETENTION_S, dead_letter_retention_days=2, bus_partitions=3
    )  # the dead letters are one stream however many partitions the others have
    removed = await trim_all(redis, settings, [Stream.DEAD_LETTER, Stream.CHAT_OUT], NOW_MS)
    assert removed == 1
    assert await remaining(redis, stream) == ids[1:]


async def test_every_partition_of_a_stream_is_trimmed(redis: Redis) -> None:
    settings = BusSettings(stream_retention_seconds=RETENTION_S, bus_partitions=3)
    kept = []
    for key in settings.partitions.keys(Stream.MEMORY_RPC.value):
        await create_stream(redis, key)
        ids = await fill(redis, key, [10, 0])
        await redis.xack(key, Group.MEMORY.value, *await read(redis, key, Group.MEMORY.value, 2))
        kept.append(ids[1:])
    assert await trim_all(redis, settings, [Stream.MEMORY_RPC], NOW_MS) == 3
    assert [
        await remaining(redis, key) for key in settings.partitions.keys(Stream.MEMORY_RPC.value)
    ] == kept


async def test_an_inbox_is_trimmed_by_age_up_to_what_its_gateway_read(redis: Redis) -> None:
    inbox = "memoria:{p0.0}:gateway:gw-a:inbox"
    ids = await fill(redis, inbox, [10, 5, 2, 0])
    async with redis.pipeline(transaction=False) as pipe:
        queue_inbox_trim(pipe, inbox, RETENTION_S, NOW_MS, read_up_to=EntryId.of(ids[1]))
        queue_inbox_trim(
            pipe, "memoria:{p0.0}:gateway:gone:inbox", RETENTION_S, NOW_MS, EntryId(0, 0)
        )
        await pipe.execute()
    assert await remaining(redis, inbox) == ids[2:]  # 2 minutes old, but not read yet
    assert not await redis.exists("memoria:{p0.0}:gateway:gone:inbox")  # nothing made
