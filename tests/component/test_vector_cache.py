"""Users' vectors held in process (``vectors.cached.CachedVectorStore``) on a real
milvus-lite and a real broker: searches answered from the copy, never from rows older than
the last acknowledged write of any replica, and nothing lost when the broker is away.

Each "replica" is a store of its own over its own Milvus client, as two memory service
processes would have; they share the server, the collection and the broker."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from redis.asyncio import Redis
from stack import restartable_broker

from memoria_memory.vectors.cached import CachedVectorStore
from memoria_memory.vectors.milvus import MilvusVectorStore, async_client
from memoria_memory.vectors.port import VectorHit, VectorRow, VectorStoreError, collection_name
from memoria_memory.vectors.versions import VectorVersions
from memoria_runtime import redis_clients
from memoria_runtime.metrics import REGISTRY, VECTOR_SEARCHES_TOTAL, VECTORS_HELD_BYTES
from memoria_runtime.settings import Settings

DIM = 8
BUDGET_BYTES = 1024 * 1024
HELD_WAIT_S = 30.0
ALICE = "alice"


def axis(index: int, lean: float = 0.0) -> list[float]:
    """A unit vector along ``index``, leaning towards the next axis by ``lean``."""
    vector = [0.0] * DIM
    vector[index] = 1.0
    vector[(index + 1) % DIM] = lean
    norm = math.sqrt(1.0 + lean * lean)
    return [value / norm for value in vector]


class CountingMilvus(MilvusVectorStore):
    """The real adapter, counting the searches that reach Milvus."""

    searches = 0

    async def search(
        self, user_id: str, vectors: Sequence[Sequence[float]], limit: int
    ) -> list[list[VectorHit]]:
        self.searches += 1
        return await super().search(user_id, vectors, limit)


class Replica:
    def __init__(self, milvus_uri: str, collection: str, broker: Redis, budget: int) -> None:
        self.milvus = CountingMilvus(milvus_uri, collection, DIM)
        self.store = CachedVectorStore(self.milvus, VectorVersions(broker, collection), budget)

    async def nearest(self, user_id: str, vector: list[float], limit: int = 3) -> list[str]:
        [hits] = await self.store.search(user_id, [vector], limit)
        return [hit.id for hit in hits]

    async def held(self, user_id: str) -> None:
        """Search once and wait until the copy made in the background is there."""
        await self.nearest(user_id, axis(0))
        async with asyncio.timeout(HELD_WAIT_S):
            await self.store.settled()
        assert user_id in self.store.held_users


@pytest.fixture
async def collection(milvus_uri: str) -> AsyncIterator[str]:
    name = collection_name(f"held-{uuid.uuid4().hex[:12]}", DIM)
    yield name
    admin = async_client(milvus_uri)
    try:
        if await admin.has_collection(name):
            await admin.drop_collection(name)
    finally:
        await admin.close()


async def replicas(
    milvus_uri: str, collection: str, broker: Redis, count: int = 2, budget: int = BUDGET_BYTES
) -> list[Replica]:
    made = [Replica(milvus_uri, collection, broker, budget) for _ in range(count)]
    for replica in made:
        await replica.store.open()
    return made


async def close(*made: Replica) -> None:
    for replica in made:
        await replica.store.close()


def searches(source: str) -> float:
    return REGISTRY.get_sample_value(VECTOR_SEARCHES_TOTAL, {"source": source}) or 0.0


def held_bytes() -> float:
    return REGISTRY.get_sample_value(VECTORS_HELD_BYTES) or 0.0


def rows(*items: tuple[str, list[float]]) -> list[VectorRow]:
    return [VectorRow(row_id, f"mem_{row_id}", vector) for row_id, vector in items]


async def test_a_held_copy_answers_searches_and_milvus_is_asked_once(
    milvus_uri: str, collection: str, redis: Redis
) -> None:
    [replica] = await replicas(milvus_uri, collection, redis, count=1)
    try:
        await replica.store.upsert(ALICE, rows(("a", axis(0)), ("b", axis(1)), ("c", axis(2))))
        from_milvus = await replica.milvus.search(ALICE, [axis(1, 0.3)], 3)
        replica.milvus.searches = 0
        counted = searches("held"), searches("milvus"), held_bytes()

        await replica.held(ALICE)  # the first search: from Milvus, the copy made meanwhile
        held = [await replica.store.search(ALICE, [axis(1, 0.3)], 3) for _ in range(5)]

        assert replica.milvus.searches == 1
        # What an operator sizes the budget by: the metrics say the same.
        assert (searches("held"), searches("milvus")) == (counted[0] + 5, counted[1] + 1)
        assert held_bytes() == counted[2] + replica.store.held_bytes > counted[2]
        for [hits] in held:
            assert [(h.id, h.memory_id) for h in hits] == [
                (h.id, h.memory_id) for h in from_milvus[0]
            ]
            assert [h.score for h in hits] == pytest.approx([h.score for h in from_milvus[0]])
    finally:
        await close(replica)
    assert held_bytes() == counted[2]  # a closed store holds nothing


async def test_own_writes_are_applied_to_the_copy_and_searchable_at_once(
    milvus_uri: str, collection: str, redis: Redis
) -> None:
    [replica] = await replicas(milvus_uri, collection, redis, count=1)
    try:
        await replica.store.upsert(ALICE, rows(("a", axis(0)), ("b", axis(1))))
        await replica.held(ALICE)
        replica.milvus.searches = 0

        await replica.store.upsert(ALICE, rows(("new", axis(3))))
        assert await replica.nearest(ALICE, axis(3), 1) == ["new"]
        await replica.store.upsert(ALICE, rows(("a", axis(5))))  # a's vector replaced
        assert await replica.nearest(ALICE, axis(5), 1) == ["a"]
        await replica.store.delete(ALICE, ["new"])
        assert "new" not in await replica.nearest(ALICE, axis(3), 5)

        assert replica.milvus.searches == 0  # every answer came from the kept copy
        assert replica.store.held_users == [ALICE]
    finally:
        await close(replica)


async def test_another_replicas_writes_are_seen_by_the_next_search(
    milvus_uri: str, collection: str, redis: Redis
) -> None:
    one, two = await replicas(milvus_uri, collection, redis)
    try:
        await one.store.upsert(ALICE, rows(("a", axis(0)), ("b", axis(1))))
        await one.held(ALICE)

        await two.store.upsert(ALICE, rows(("from-two", axis(4))))
        assert await one.nearest(ALICE, axis(4), 1) == ["from-two"]
        await one.held(ALICE)  # made again, with it
        await two.store.upsert(ALICE, rows(("a", axis(6))))
        assert await one.nearest(ALICE, axis(6), 1) == ["a"]
        await one.held(ALICE)
        await two.store.delete(ALICE, ["from-two"])
        assert "from-two" not in await one.nearest(ALICE, axis(4), 5)
    finally:
        await close(one, two)


async def test_a_process_that_holds_nothing_still_tells_the_others_it_wrote(
    milvus_uri: str, collection: str, redis: Redis
) -> None:
    """``MEMORIA_VECTOR_CACHE_MB=0`` (or the CLI's settings) turns holding off, never the
    versions: its writes must still make other replicas' copies stale."""
    [holder] = await replicas(milvus_uri, collection, redis, count=1)
    [writer] = await replicas(milvus_uri, collection, redis, count=1, budget=0)
    try:
        await holder.store.upsert(ALICE, rows(("a", axis(0))))
        await holder.held(ALICE)

        await writer.store.upsert(ALICE, rows(("from-the-cli", axis(3))))
        assert await holder.nearest(ALICE, axis(3), 1) == ["from-the-cli"]
        assert writer.store.held_users == []
    finally:
        await close(holder, writer)


async def test_a_broker_that_lost_its_versions_never_validates_an_old_copy(
    milvus_uri: str, collection: str, redis: Redis
) -> None:
    """Versions are random tokens, not counters: after the broker lost them (restarted
    without its file, flushed, expired) no later version can equal the one a copy holds."""
    one, two = await replicas(milvus_uri, collection, redis)
    try:
        await one.store.upsert(ALICE, rows(("a", axis(0))))
        await one.held(ALICE)

        await redis.flushall()
        await two.store.upsert(ALICE, rows(("after-the-loss", axis(2))))

        assert await one.nearest(ALICE, axis(2), 1) == ["after-the-loss"]
    finally:
        await close(one, two)


async def test_copies_stay_within_the_budget_least_recently_searched_first(
    milvus_uri: str, collection: str, redis: Redis
) -> None:
    users = ["u1", "u2", "u3", "u4", "big"]
    probe = await replicas(milvus_uri, collection, redis, count=1)
    try:
        for user in users[:4]:
            await probe[0].store.upsert(user, rows(*((f"r{i}", axis(i)) for i in range(4))))
        # Rows along the same few axes, each leaning its own amount: one nearest to any axis.
        big = rows(*((f"r{i}", axis(i % DIM, i / 100)) for i in range(64)))
        await probe[0].store.upsert("big", big)
        await probe[0].held("u1")
        one_user = probe[0].store.held_bytes
    finally:
        await close(*probe)

    [replica] = await replicas(milvus_uri, collection, redis, count=1, budget=2 * one_user)
    try:
        for user in ("u1", "u2", "u3"):
            await replica.held(user)
        assert replica.store.held_users == ["u2", "u3"]
        await replica.nearest("u2", axis(0))  # u2 searched again: u3 is now the oldest
        await replica.held("u4")
        assert replica.store.held_users == ["u2", "u4"]
        assert replica.store.held_bytes <= 2 * one_user

        # More rows than the whole budget: never held, searched in Milvus all the same.
        for _ in range(3):
            assert await replica.nearest("big", axis(5), 1) == ["r5"]
            await replica.store.settled()
            assert "big" not in replica.store.held_users
    finally:
        await close(replica)


async def test_while_the_broker_is_away_searches_go_to_milvus_and_writes_fail_loudly(
    milvus_uri: str, collection: str, tmp_path: Path
) -> None:
    with restartable_broker(tmp_path) as server:
        broker = redis_clients.connect(
            Settings.load(redis_url=f"redis://127.0.0.1:{server.port}/0").bus
        )
        [replica] = await replicas(milvus_uri, collection, broker, count=1)
        try:
            await replica.store.upsert(ALICE, rows(("a", axis(0)), ("b", axis(1))))
            await replica.held(ALICE)
            replica.milvus.searches = 0

            await asyncio.to_thread(server.stop)
            assert await replica.nearest(ALICE, axis(1), 1) == ["b"]
            assert replica.milvus.searches == 1  # not the copy: its version is unknowable
            with pytest.raises(VectorStoreError, match="could not publish their new version"):
                await replica.store.upsert(ALICE, rows(("c", axis(2))))
            assert ALICE not in replica.store.held_users  # the copy cannot follow: dropped

            await asyncio.to_thread(server.start)
            # The write reached Milvus; its retry (the reconciler's) publishes the version.
            await replica.store.upsert(ALICE, rows(("c", axis(2))))
            assert await replica.nearest(ALICE, axis(2), 1) == ["c"]
            await replica.held(ALICE)
            assert await replica.nearest(ALICE, axis(2), 1) == ["c"]
        finally:
            await close(replica)
            await broker.aclose()
