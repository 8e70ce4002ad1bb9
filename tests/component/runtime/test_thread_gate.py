"""The thread gate on a real server: one cycle per thread, queued messages never lost."""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from memoria_contracts.streams import READERS, Group, Stream
from memoria_runtime import keys
from memoria_runtime.bus.thread_gate import KeyWrite, ThreadGate
from memoria_runtime.partitions import Partitions

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

LOCK_TTL_S = 60
MAXLEN = 1000


def gate(redis: Redis) -> ThreadGate:
    return ThreadGate(redis, lock_ttl_s=LOCK_TTL_S, stream_maxlen=MAXLEN, partitions=PARTITIONS)


async def chat_in(redis: Redis) -> list[bytes]:
    entries = cast(
        "list[tuple[bytes, dict[bytes, bytes]]]", await redis.xrange(Stream.CHAT_IN.value)
    )
    return [fields[b"__data__"] for _, fields in entries]


async def test_free_thread_dispatches_and_busy_thread_queues(redis: Redis) -> None:
    g = gate(redis)
    first = await g.admit("ana", "t1", "m1", b"frame-1")
    second = await g.admit("ana", "t1", "m2", b"frame-2")

    assert first.outcome == "dispatched"
    assert second.outcome == "queued"
    assert await chat_in(redis) == [b"frame-1"]
    assert await redis.get(keys.thread_lock(ONE, "ana", "t1")) == b"m1"


async def test_release_dispatches_queued_messages_in_order(redis: Redis) -> None:
    g = gate(redis)
    for n in range(1, 4):
        await g.admit("ana", "t1", f"m{n}", f"frame-{n}".encode())

    assert await g.release("ana", "t1", "m1") == "m2"
    assert await g.release("ana", "t1", "m2") == "m3"
    assert await g.release("ana", "t1", "m3") is None
    assert await chat_in(redis) == [b"frame-1", b"frame-2", b"frame-3"]
    assert await redis.exists(keys.thread_lock(ONE, "ana", "t1")) == 0


async def test_release_twice_is_harmless(redis: Redis) -> None:
    g = gate(redis)
    await g.admit("ana", "t1", "m1", b"frame-1")
    await g.admit("ana", "t1", "m2", b"frame-2")
    await g.admit("ana", "t1", "m3", b"frame-3")

    assert await g.release("ana", "t1", "m1") == "m2"
    assert await g.release("ana", "t1", "m1") is None  # a redelivered end of m1's cycle
    assert await chat_in(redis) == [b"frame-1", b"frame-2"]
    assert await redis.get(keys.thread_lock(ONE, "ana", "t1")) == b"m2"


async def test_threads_and_users_are_independent(redis: Redis) -> None:
    g = gate(redis)
    assert (await g.admit("ana", "t1", "m1", b"a")).outcome == "dispatched"
    assert (await g.admit("ana", "t2", "m2", b"b")).outcome == "dispatched"
    assert (await g.admit("bob", "t1", "m3", b"c")).outcome == "dispatched"


async def test_client_id_makes_a_resend_a_duplicate(redis: Redis) -> None:
    g = gate(redis)
    first = await g.admit("ana", "t1", "m1", b"frame-1", client_message_id="client-0001")
    again = await g.admit("ana", "t1", "m9", b"frame-1", client_message_id="client-0001")

    assert again.outcome == "duplicate"
    assert again.message_id == first.message_id == "m1"
    assert await chat_in(redis) == [b"frame-1"]
    other_user = await g.admit("bob", "t1", "m5", b"x", client_message_id="client-0001")
    assert other_user.outcome == "dispatched"


async def test_expired_lock_serves_the_oldest_waiting_message_first(redis: Redis) -> None:
    g = gate(redis)
    await g.admit("ana", "t1", "m1", b"frame-1")
    await g.admit("ana", "t1", "m2", b"frame-2")
    await redis.delete(keys.thread_lock(ONE, "ana", "t1"))  # m1's cycle died; its lock expired

    result = await g.admit("ana", "t1", "m3", b"frame-3")

    assert result.outcome == "queued"
    assert await chat_in(redis) == [b"frame-1", b"frame-2"]
    assert await redis.get(keys.thread_lock(ONE, "ana", "t1")) == b"m2"
    assert await g.release("ana", "t1", "m2") == "m3"


async def test_refresh_and_open_respect_the_owner(redis: Redis) -> None:
    g = gate(redis)
    await g.admit("ana", "t1", "m1", b"frame-1")

    assert await g.refresh("ana", "t1", "m1") is True
    assert await g.refresh("ana", "t1", "m2") is False
    assert (await g.open("ana", "t1", "m1", started="s1", then_read="p")).owns is True
    assert (await g.open("ana", "t1", "m2", started="s2", then_read="p")).owns is False
    await g.release("ana", "t1", "m1")
    assert (await g.open("ana", "t1", "m2", started="s2", then_read="p")).owns is True


async def test_binary_frames_survive_the_queue(redis: Redis) -> None:
    g = gate(redis)
    framed = bytes(range(256)) + b"\t\x00tail"
    await g.admit("ana", "t1", "m1", b"first")
    await g.admit("ana", "t1", "m2", framed)
    await g.release("ana", "t1", "m1")
    assert (await chat_in(redis))[-1] == framed


async def test_open_takes_over_a_free_thread_and_reads_once_owned(redis: Redis) -> None:
    g = gate(redis)
    await redis.set("pending", b"asked")
    opening = await g.open("ana", "t1", "m1", started="state", then_read="pending")

    assert (opening.started, opening.owns, opening.read) == (None, True, b"asked")
    assert await redis.get(keys.thread_lock(ONE, "ana", "t1")) == b"m1"
    missing = await g.open("ana", "t1", "m1", started="state", then_read="nothing")
    assert (missing.owns, missing.read) == (True, None)


async def test_open_refreshes_its_own_lock_and_leaves_anothers(redis: Redis) -> None:
    g = gate(redis)
    await g.admit("ana", "t1", "m1", b"frame-1")
    await redis.expire(keys.thread_lock(ONE, "ana", "t1"), 5)

    assert (await g.open("ana", "t1", "m1", started="s", then_read="p")).owns is True
    assert await redis.ttl(keys.thread_lock(ONE, "ana", "t1")) > 5  # fresh: no refresh needed
    other = await g.open("ana", "t1", "m2", started="s2", then_read="p")
    assert (other.owns, other.read) == (False, None)
    assert await redis.get(keys.thread_lock(ONE, "ana", "t1")) == b"m1"


async def test_open_of_a_started_cycle_takes_nothing(redis: Redis) -> None:
    """A redelivery of an ended cycle's message must not lock the thread it released."""
    g = gate(redis)
    await redis.set("state", b"{}")
    opening = await g.open("ana", "t1", "m1", started="state", then_read="p")

    assert (opening.started, opening.owns) == (b"{}", False)
    assert await redis.get(keys.thread_lock(ONE, "ana", "t1")) is None


async def test_release_saves_its_write_whoever_owns_the_lock(redis: Redis) -> None:
    g = gate(redis)
    await g.admit("ana", "t1", "m1", b"frame-1")
    await g.admit("ana", "t1", "m2", b"frame-2")

    assert await g.release("ana", "t1", "m1", save=KeyWrite("end", "first", 60)) == "m2"
    assert await g.release("ana", "t1", "m1", save=KeyWrite("end", "again", 60)) is None
    assert await redis.get("end") == b"again"  # a redelivered end saves, releases nothing
    assert 0 < await redis.ttl("end") <= 60
    assert await redis.get(keys.thread_lock(ONE, "ana", "t1")) == b"m2"


async def test_a_queued_refresh_survives_a_broker_that_forgot_the_script(redis: Redis) -> None:
    g = gate(redis)
    await g.admit("ana", "t1", "m1", b"frame-1")
    await redis.expire(keys.thread_lock(ONE, "ana", "t1"), 5)
    await redis.script_flush()  # as after a broker restart

    async with redis.pipeline(transaction=False) as pipe:
        g.queue_refresh(pipe, "ana", "t1", "m1")
        pipe.get(keys.thread_lock(ONE, "ana", "t1"))
        refresh, owner = await pipe.execute(raise_on_error=False)
    assert owner == b"m1"
    assert await g.refreshed(refresh, "ana", "t1", "m1") is True
    assert await redis.ttl(keys.thread_lock(ONE, "ana", "t1")) > 5


async def unread_by(redis: Redis, group: Group) -> list[bytes]:
    """What ``group`` has yet to read on chat.in (nothing at all: no such group)."""
    reply = cast(
        "list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]",
        await redis.xreadgroup(group.value, "reader", {Stream.CHAT_IN.value: ">"}),
    )
    return [fields[b"__data__"] for _, entries in reply for _, fields in entries]


async def test_a_queued_message_released_after_a_flush_waits_for_every_reader(
    redis: Redis,
) -> None:
    """The gate creates chat.in with the groups that read it (ADR 0018), when it releases a
    queued message as when it admits one."""
    g = gate(redis)
    await g.admit("ana", "t1", "m1", b"frame-1")
    await g.admit("ana", "t1", "m2", b"frame-2")
    await redis.delete(Stream.CHAT_IN.value)  # a flushed broker, with m2 still waiting
    await g.release("ana", "t1", "m1")

    for group in READERS[Stream.CHAT_IN]:
        assert await unread_by(redis, group) == [b"frame-2"]


async def test_a_message_admitted_on_an_empty_broker_waits_for_every_reader(
    redis: Redis,
) -> None:
    """Before decision and the memory service have ever started: both read it when they
    come."""
    await gate(redis).admit("ana", "t1", "m1", b"frame-1")

    for group in READERS[Stream.CHAT_IN]:
        assert await unread_by(redis, group) == [b"frame-1"]
