"""A history read sees every message posted before it, even while the memory service's
history group is behind on chat.out (a real broker; the group's progress is driven by hand,
as a slow or crashed replica would leave it)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from redis.asyncio import Redis

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import Envelope, HistoryPage, HistoryQuery
from memoria_contracts.streams import Group, Stream
from memoria_memory.docstore.sqlite import SqliteDocumentStore
from memoria_memory.handlers import MemoryHandlers
from memoria_memory.history import COLLECTION as MESSAGES
from memoria_memory.history import HistoryRepository, stream_sequence
from memoria_memory.history_catch_up import HistoryCatchUp
from memoria_memory.storage import MemoryStorage
from memoria_memory.threads import ThreadRepository
from memoria_runtime import metrics
from memoria_runtime.bus import Delivery
from memoria_runtime.partitions import Partitions
from memoria_runtime.settings import Settings

CHAT_OUT, GROUP = Stream.CHAT_OUT.value, Group.MEMORY_HISTORY.value
SHORT_WAIT_S = 0.3
LONG_WAIT_S = 30.0  # never reached when the test passes: the wait ends on the group's progress
REPLICA = "memory-replica-1"
USER, THREAD = "ana", "t1"


def catch_up(
    redis: Redis, wait_s: float = SHORT_WAIT_S, given_up_after_s: float = LONG_WAIT_S
) -> HistoryCatchUp:
    """Waits up to ``wait_s``; entries pending longer than ``given_up_after_s`` are not
    waited for (long by default: these tests' entries are held by a live replica)."""
    return HistoryCatchUp(
        redis, Partitions(), wait_limit_s=wait_s, given_up_after_s=given_up_after_s
    )


Entries = list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]


async def post(redis: Redis, count: int = 1) -> list[str]:
    ids = [cast(bytes, await redis.xadd(CHAT_OUT, {"n": str(n)})) for n in range(count)]
    return [i.decode() for i in ids]


async def take(redis: Redis) -> list[str]:
    """What one replica of the history group reads (delivered, pending until acknowledged)."""
    reply = cast(Entries, await redis.xreadgroup(GROUP, REPLICA, {CHAT_OUT: ">"}, count=100))
    return [entry_id.decode() for _, entries in reply for entry_id, _ in entries]


async def ack(redis: Redis, ids: list[str]) -> None:
    await redis.xack(CHAT_OUT, GROUP, *ids)


async def claim(redis: Redis, consumer: str, ids: list[str], *, idle_ms: int) -> None:
    """Give pending entries to ``consumer`` as pending for ``idle_ms`` (XCLAIM's IDLE)."""
    await redis.xclaim(CHAT_OUT, GROUP, consumer, 0, cast(list[Any], ids), idle=idle_ms)


async def make_group(redis: Redis) -> None:
    await redis.xgroup_create(CHAT_OUT, GROUP, id="0", mkstream=True)


def reads_behind() -> float:
    return metrics.REGISTRY.get_sample_value(metrics.HISTORY_READS_BEHIND_TOTAL) or 0.0


async def test_with_nothing_posted_a_read_waits_for_nothing(redis: Redis) -> None:
    assert await catch_up(redis).wait(USER) is True
    await make_group(redis)
    assert await catch_up(redis).wait(USER) is True


async def test_a_read_waits_while_entries_before_it_are_unread_or_unstored(redis: Redis) -> None:
    await make_group(redis)
    ids = await post(redis, 3)
    before = reads_behind()
    assert await catch_up(redis).wait(USER) is False  # not even read by the group
    await take(redis)
    assert await catch_up(redis).wait(USER) is False  # read, still being stored
    await ack(redis, ids[:2])
    assert await catch_up(redis).wait(USER) is False  # the last one is still being stored
    assert reads_behind() == before + 3
    await ack(redis, ids[2:])
    assert await catch_up(redis).wait(USER) is True
    assert reads_behind() == before + 3


async def test_a_read_goes_on_as_soon_as_the_group_has_stored_up_to_it(redis: Redis) -> None:
    await make_group(redis)
    ids = await post(redis, 2)
    await take(redis)
    waiting = asyncio.create_task(catch_up(redis, LONG_WAIT_S).wait(USER))
    await asyncio.sleep(0.05)
    await post(redis)  # after the read began: not waited for, never read here
    await ack(redis, ids)
    assert await asyncio.wait_for(waiting, 10) is True
    # The read went on with the later entry still unread by the group.
    (group,) = await redis.xinfo_groups(CHAT_OUT)
    assert group["last-delivered-id"].decode() == ids[-1]
    assert group["pending"] == 0


async def test_entries_a_crashed_replica_left_pending_do_not_hold_every_read(
    redis: Redis,
) -> None:
    """A replica killed while storing leaves its entries pending until the reclaim (30 s);
    reads must not each wait their bound for them meanwhile."""
    await make_group(redis)
    orphans = await post(redis, 2)
    await take(redis)
    given_up_s = 5.0

    def reads() -> HistoryCatchUp:
        return catch_up(redis, given_up_after_s=given_up_s)

    # Pending that long, as a crashed holder leaves them (XCLAIM sets the idle time).
    await claim(redis, REPLICA, orphans, idle_ms=round(given_up_s * 1000))
    assert await reads().wait(USER) is True
    # Not acknowledged by the read: still there for the reclaim to store.
    assert (await redis.xpending(CHAT_OUT, GROUP))["pending"] == 2

    # One just delivered after them (a live replica storing it) is still waited for...
    (fresh,) = await post(redis)
    await take(redis)
    assert await reads().wait(USER) is False
    # ...and so are the orphans once reclaimed, since someone is storing them again.
    await ack(redis, [fresh])
    await claim(redis, "memory-replica-2", orphans, idle_ms=0)
    assert await reads().wait(USER) is False
    await ack(redis, orphans)
    assert await reads().wait(USER) is True


async def test_without_a_history_group_nobody_stores_so_nothing_is_waited_for(
    redis: Redis,
) -> None:
    await post(redis, 2)
    assert await catch_up(redis).wait(USER) is True


async def test_a_broker_that_is_away_never_fails_the_read(caplog: pytest.LogCaptureFixture) -> None:
    away = Redis.from_url("redis://127.0.0.1:1/0")
    waits = catch_up(away)
    try:
        with caplog.at_level(logging.WARNING, logger="memoria.memory.history"):
            assert [await waits.wait(USER) for _ in range(3)] == [False, False, False]
    finally:
        await away.aclose()
    # One line for a run of reads behind, not one per read.
    assert len(caplog.records) == 1
    assert "1 history read(s) answered with what was stored" in caplog.records[0].getMessage()


# -- through the memory service's handler ---------------------------------------------------


@pytest.fixture
async def handlers(tmp_path: Path, redis: Redis) -> AsyncIterator[MemoryHandlers]:
    store = await SqliteDocumentStore.open(tmp_path / "docs.db")
    history = HistoryRepository(store.collection(MESSAGES))
    await history.setup()
    threads = ThreadRepository(store)
    await threads.setup()
    served = MemoryHandlers(Settings.load(_env_file=None))
    storage = SimpleNamespace(history=history, summaries=None, summarizer=None)
    served.attach(cast(MemoryStorage, storage), threads, catch_up(redis, LONG_WAIT_S))
    try:
        yield served
    finally:
        await store.close()


def answer(text: str) -> ChatRecord:
    return ChatRecord.model_validate(
        {
            "id": "c1.answer",
            "cycle_id": "c1",
            "chat-history": True,
            "modal": "text",
            "role": "assistant",
            "content": text,
        }
    )


async def test_the_next_cycle_reads_the_answer_the_history_group_is_still_storing(
    redis: Redis, handlers: MemoryHandlers
) -> None:
    await make_group(redis)
    (entry_id,) = await post(redis)  # the previous cycle's answer, on chat.out
    await take(redis)  # a replica of the history group has it and is storing it
    query = Envelope(user_id=USER, thread_id=THREAD, payload=HistoryQuery(limit=10))
    reading = asyncio.create_task(handlers.on_request(query, cast(Delivery, None)))
    await asyncio.sleep(0.1)

    # The replica stores it, then acknowledges, as the chat.out handler does.
    await handlers.storage.history.save(
        USER, THREAD, answer("It is in Porto."), stream_sequence(entry_id)
    )
    await ack(redis, [entry_id])

    reply = await asyncio.wait_for(reading, 10)
    assert isinstance(reply.payload, HistoryPage)
    assert [m.content for m in reply.payload.messages] == ["It is in Porto."]
