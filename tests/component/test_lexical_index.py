"""Memories written before lexical search get their texts indexed by the pass at start
(``lexical_index.backfill``), against real stores: SQLite documents and a real milvus-lite
server. A store "written before" is made by saving memories and then dropping the texts'
collection, which is exactly what such a store lacks.

The scripted LLM provider's hash embeddings at a dimension no other test uses, so these
collections can be dropped.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from memoria_contracts.memory import MemorySave, MemorySaved, MemorySearch, MemoryUpdate
from memoria_memory.memories import lexical_index
from memoria_memory.storage import MemoryStorage
from memoria_memory.vectors import TextRow, VectorStore
from memoria_memory.vectors.milvus import lexical_collection_name, sync_client
from memoria_runtime.settings import MemoryRetrieval, MemoryServiceSettings, Settings

DIM = 40  # used by no other test: its collections are dropped here

MEMORIES: list[tuple[str, list[str]]] = [
    ("The wifi password is Zebra-Quartz-77", ["wifi password"]),
    ("Minha consulta no dentista é na quinta-feira", ["consulta médica"]),
    ("I adopted a greyhound called Biscuit", ["pet"]),
    ("Favourite dish: bacalhau à brás", ["favourite food"]),
    ("The car is booked for inspection in March", ["car inspection"]),
]
QUERIES = ["Zebra-Quartz-77", "dentista quinta", "Biscuit", "bacalhau bras", "inspection"]

pytestmark = pytest.mark.usefixtures("storage_broker")


def settings(tmp_path: Path, milvus_uri: str, retrieval: MemoryRetrieval) -> Settings:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rules": [{"match": ""}], "embedding_dim": DIM}))
    return Settings.load(
        data_dir=tmp_path,
        docstore_url=f"sqlite:///{tmp_path / 'memoria.db'}",
        milvus_uri=milvus_uri,
        embedder="llm",
        llm_provider="scripted",
        scripted_llm_file=script,
        embedding_dim=DIM,
        memory_retrieval=retrieval,
        memory_min_relevance=0.0,
    )


def drop(milvus_uri: str, *names: str) -> None:
    client = sync_client(milvus_uri)
    try:
        for name in names:
            if client.has_collection(name):
                client.drop_collection(name)
    finally:
        client.close()


@pytest.fixture
def collections(milvus_uri: str) -> Iterator[list[str]]:
    """Names of collections the test made, dropped afterwards."""
    made: list[str] = []
    yield made
    drop(milvus_uri, *made)


def made_by(storage: MemoryStorage, collections: list[str]) -> str:
    """The storage's texts collection (noted for dropping, with its vectors')."""
    dense = storage.vectors.collection
    collections += [dense, lexical_collection_name(dense)]
    return lexical_collection_name(dense)


@asynccontextmanager
async def opened(config: Settings) -> AsyncIterator[MemoryStorage]:
    storage = await MemoryStorage.open(config.process(MemoryServiceSettings))
    try:
        yield storage
    finally:
        await storage.close()


async def found(storage: MemoryStorage, user: str, query: str) -> list[str]:
    result = await storage.reader.search(user, MemorySearch(queries=[query]))
    return [memory.memory_id for memory in result.memories]


async def save_all(storage: MemoryStorage, user: str) -> list[str]:
    ids = []
    for content, bindings in MEMORIES:
        request = MemorySave(
            idempotency_key=uuid.uuid4().hex,
            content=content,
            bindings=bindings,
            memory_type="user_profile",
        )
        reply = await storage.writer.save(user, request, cycle_id=None)
        assert isinstance(reply, MemorySaved), reply
        ids.append(reply.memory_id)
    return ids


def failing_after(store: VectorStore, calls: int) -> Callable[..., Awaitable[None]]:
    """``store.index_text``, failing every call after the first ``calls``: a crash of the
    pass part way."""
    index_text = store.index_text
    left = [calls]

    async def index(user_id: str, rows: Sequence[TextRow]) -> None:
        if left[0] <= 0:
            raise RuntimeError("the process died here")
        left[0] -= 1
        await index_text(user_id, rows)

    return index


async def test_old_memories_are_found_by_their_words_once_the_pass_ran(
    tmp_path: Path,
    milvus_uri: str,
    collections: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user = f"u{uuid.uuid4().hex[:12]}"
    lexical = settings(tmp_path, milvus_uri, "lexical")
    async with opened(lexical) as storage:
        ids = await save_all(storage, user)
        assert await found(storage, user, QUERIES[0]) == [ids[0]]  # written with its text
        texts = made_by(storage, collections)
    await asyncio.to_thread(drop, milvus_uri, texts)  # a store from before

    async with opened(lexical) as storage:
        assert [await found(storage, user, query) for query in QUERIES] == [[]] * len(QUERIES)
        repo = storage.writer.repo
        vectors = storage.vectors

        # Two pages of two memories indexed, then a crash.
        with monkeypatch.context() as patch:
            patch.setattr(vectors, "index_text", failing_after(vectors, calls=2))
            with pytest.raises(RuntimeError, match="died"):
                await lexical_index.backfill(repo, vectors, page=2)
        first_pass = [bool(await found(storage, user, query)) for query in QUERIES]
        order = sorted(range(len(ids)), key=lambda index: ids[index])  # the pass goes by id
        assert [first_pass[index] for index in order] == [True, True, True, True, False]

        # The next start goes on from there, and the one after finds nothing to do.
        assert await lexical_index.backfill(repo, vectors, page=2) == 1
        assert await lexical_index.backfill(repo, vectors, page=2) == 0
        for memory_id, query in zip(ids, QUERIES, strict=True):
            assert await found(storage, user, query) == [memory_id]


async def test_hybrid_search_keeps_finding_by_meaning_and_adds_words(
    tmp_path: Path, milvus_uri: str, collections: list[str]
) -> None:
    user = f"u{uuid.uuid4().hex[:12]}"
    async with opened(settings(tmp_path, milvus_uri, "hybrid")) as storage:
        made_by(storage, collections)
        ids = await save_all(storage, user)
        # The hash embedder matches a binding's exact text; the words of the content only
        # lexical search knows.
        assert (await found(storage, user, "wifi password"))[0] == ids[0]
        assert (await found(storage, user, "Biscuit the greyhound"))[0] == ids[2]

        # An update of the content alone (same bindings) is found by its new words only.
        reply = await storage.writer.update(
            user,
            MemoryUpdate(memory_id=ids[2], content="I adopted a whippet called Pretzel"),
            cycle_id=None,
            request_id="r1",
        )
        assert not hasattr(reply, "code"), reply
        assert await storage.vectors.lexical_search(user, ["Biscuit"], limit=5) == [[]]
        assert (await found(storage, user, "Pretzel"))[0] == ids[2]


async def test_a_questions_own_words_are_no_lexical_evidence(
    tmp_path: Path, milvus_uri: str, collections: list[str]
) -> None:
    """BM25 searches a question's key terms: "kind" and "many" in the question do not find
    the memories that happen to say them."""
    user = f"u{uuid.uuid4().hex[:12]}"
    async with opened(settings(tmp_path, milvus_uri, "lexical")) as storage:
        made_by(storage, collections)
        ids = await save_all(storage, user)
        reply = await storage.writer.save(
            user,
            MemorySave(
                idempotency_key=uuid.uuid4().hex,
                content="Be kind to the many neighbours",
                bindings=["neighbours"],
            ),
            cycle_id=None,
        )
        assert isinstance(reply, MemorySaved), reply
        assert await found(storage, user, "What kind of dish do I like?") == [ids[3]]
        assert await found(storage, user, "How many times was the car inspection?") == [ids[4]]
