"""Move every memory to the embedding model the settings select now (`memoria reembed`).

Vectors of different models never share a collection (``vectors.port.collection_name``), so
after a change of ``MEMORIA_EMBEDDER`` (or of the Gemini model or dimension) the memories
saved before point to another collection and semantic search no longer finds them. This
module re-embeds their bindings with the current embedder, writes the rows into the current
collection under the SAME deterministic row ids, and then points each document there.

Crash safety follows the writer's rules: rows are upserts of known ids and the document is
switched last, in one update, so a memory is either still wholly in its old collection or
wholly migrated; running again simply continues. Rows written for a memory whose switch did
not happen are orphans the reconciler removes (and a new run writes them again anyway).

Old collections are remembered in the document store when a run finds them, so ``drop_old``
also works on a later run (migrate while the old service runs, restart it with the new
settings, then migrate the stragglers and drop the old collections).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from memoria_memory.docstore import Collection
from memoria_memory.memories import clock
from memoria_memory.memories.documents import MemoryDocument
from memoria_memory.memories.ids import row_id_for
from memoria_memory.memories.lexical_index import vector_rows
from memoria_memory.memories.reconciler import ReconcileReport
from memoria_memory.memories.repository import MEMORIES, MemoryRepository
from memoria_memory.storage import MemoryStorage
from memoria_memory.vectors.milvus import lexical_collection_name, sync_client
from memoria_memory.vectors.port import COLLECTION_PREFIX
from memoria_runtime.settings import StorageSettings

log = logging.getLogger("memoria.memory.reembed")

DEFAULT_BATCH = 200  # memories per page: one embedding request batch, one upsert per user
# Collections memories were migrated away from, until they are dropped (one document each).
RETIRED = "memory_retired_collections"
# This many memories failing in a row means the embedder (or Milvus) is down, not that a few
# memories are bad: stop instead of paying for (or waiting on) thousands of doomed calls.
ABORT_AFTER_CONSECUTIVE_FAILURES = 20
MILVUS_CONNECT_TIMEOUT_S = 10.0
MILVUS_REQUEST_TIMEOUT_S = 60.0  # dropping a large collection takes a while

# Drops a collection by name; False when it did not exist.
DropCollection = Callable[[str], Awaitable[bool]]


@dataclass(frozen=True)
class ReembedPlan:
    embedder: str
    dim: int
    target: str
    old: dict[str, int]  # old collection -> ready memories pointing to it
    retired: list[str]  # old collections recorded by earlier runs (dropped by drop_old)
    unsettled: int  # memories whose write is unfinished (the reconciler finishes them first)

    @property
    def to_migrate(self) -> int:
        return sum(self.old.values())


@dataclass(frozen=True)
class ReembedProgress:
    total: int
    migrated: int
    failed: int
    skipped: int


@dataclass(frozen=True)
class MemoryIssue:
    user_id: str
    memory_id: str
    reason: str


@dataclass
class ReembedReport:
    embedder: str
    target: str
    found: dict[str, int]
    reconciled: ReconcileReport
    migrated: int = 0
    failed: list[MemoryIssue] = field(default_factory=list)
    skipped: list[MemoryIssue] = field(default_factory=list)
    aborted: str | None = None
    dropped: list[str] = field(default_factory=list)
    drop_refused: str | None = None

    @property
    def ok(self) -> bool:
        """Nothing failed (skipped memories are left to the reconciler or a later run)."""
        return not self.failed and not self.reconciled.failed and self.aborted is None

    def progress(self, total: int) -> ReembedProgress:
        return ReembedProgress(total, self.migrated, len(self.failed), len(self.skipped))


async def plan(storage: MemoryStorage) -> ReembedPlan:
    """What a run would do now (read only)."""
    target = storage.vectors.collection
    return ReembedPlan(
        embedder=storage.embedder.id,
        dim=storage.embedder.dim,
        target=target,
        old=await _old_collections(storage.documents.collection(MEMORIES), target),
        retired=[name for name in await _retired(storage) if name != target],
        unsettled=len(await storage.writer.repo.unsettled(None)),
    )


async def reembed(
    storage: MemoryStorage,
    *,
    batch: int,
    drop_old: bool,
    progress: Callable[[ReembedProgress], None],
    drop: DropCollection | None = None,
) -> ReembedReport:
    """Migrate every ready memory to ``storage``'s embedder and collection. ``drop_old``
    then drops the old collections through ``drop`` (see :func:`milvus_dropper`), unless
    anything failed or was skipped."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if drop_old and drop is None:
        raise ValueError("drop_old needs a way to drop collections (drop=milvus_dropper(...))")
    # Unfinished writes first: once finished (into the current collection) they need no
    # migration, and a half-written memory must not be migrated from under its write.
    reconciled = await storage.reconciler.run_once(grace_seconds=None)
    target = storage.vectors.collection
    memories = storage.documents.collection(MEMORIES)
    found = await _old_collections(memories, target)
    await _remember_retired(storage, found, target)
    report = ReembedReport(storage.embedder.id, target, found, reconciled)
    await _Migration(storage, report, batch, progress).run()
    for document in await storage.writer.repo.unsettled(None):
        report.skipped.append(
            MemoryIssue(
                document.user_id,
                document.id,
                f"left {document.state!r} by an unfinished write, which the memory "
                "service's reconciler finishes: run again afterwards",
            )
        )
    if drop_old and drop is not None:
        await _drop_old(storage, report, drop)
    return report


def milvus_dropper(settings: StorageSettings) -> DropCollection:
    """Drops collections on the Milvus the settings name. The vector store port has no
    such operation on purpose (the service never drops anything), so this talks to Milvus
    directly with its own short-lived client."""
    uri = settings.effective_milvus_uri
    token = settings.effective_milvus_token or ""

    def drop_now(name: str) -> bool:
        client = sync_client(uri, token, MILVUS_CONNECT_TIMEOUT_S)
        try:
            # The texts first: a text collection never outlives its vectors'.
            lexical = lexical_collection_name(name)
            if client.has_collection(lexical, timeout=MILVUS_REQUEST_TIMEOUT_S):
                client.drop_collection(lexical, timeout=MILVUS_REQUEST_TIMEOUT_S)
            if not client.has_collection(name, timeout=MILVUS_REQUEST_TIMEOUT_S):
                return False
            client.drop_collection(name, timeout=MILVUS_REQUEST_TIMEOUT_S)
            return True
        finally:
            client.close()

    async def drop(name: str) -> bool:
        return await asyncio.to_thread(drop_now, name)

    return drop


# -- migration -------------------------------------------------------------------------------


class _Abort(Exception):
    """Too many failures in a row: the run stops."""


class _Migration:
    def __init__(
        self,
        storage: MemoryStorage,
        report: ReembedReport,
        batch: int,
        progress: Callable[[ReembedProgress], None],
    ) -> None:
        self._storage = storage
        self._repo: MemoryRepository = storage.writer.repo
        self._report = report
        self._batch = batch
        self._progress = progress
        self._total = sum(report.found.values())
        # Memories that failed or were skipped stay in the old collection; they are kept out
        # of later pages so that the pages still shrink.
        self._stuck: set[str] = set()
        self._failures_in_a_row = 0

    async def run(self) -> None:
        target = self._storage.vectors.collection
        while True:
            # Over-fetch by the stuck memories, which are still in the set: the page then
            # still holds up to ``batch`` memories not tried yet, in whatever order.
            candidates = await self._repo.in_other_collections(
                target, limit=self._batch + len(self._stuck)
            )
            page = [d for d in candidates if d.id not in self._stuck][: self._batch]
            if not page:
                return
            try:
                await self._migrate(page)
            except _Abort as exc:
                self._report.aborted = str(exc)
                return
            finally:
                self._progress(self._report.progress(self._total))

    async def _migrate(self, page: list[MemoryDocument]) -> None:
        vectors = await self._embed(page)
        by_user: defaultdict[str, list[MemoryDocument]] = defaultdict(list)
        for document in page:
            if document.id in vectors:
                by_user[document.user_id].append(document)
        for user_id, documents in by_user.items():
            await self._write(user_id, documents, vectors)

    async def _embed(self, page: list[MemoryDocument]) -> dict[str, list[list[float]]]:
        """Vectors per memory id. One call for the whole page (the embedder batches it);
        when that fails, memory by memory, so one bad memory does not fail the others."""
        texts = [binding for document in page for binding in document.bindings]
        try:
            flat = await self._storage.embedder.passages(texts)
        except Exception as exc:
            if len(page) == 1:
                self._fail(page[0], f"embedding failed: {exc}")
                return {}
            log.warning("embedding %d memories at once failed (%s); one by one now", len(page), exc)
            return await self._embed_one_by_one(page)
        vectors: dict[str, list[list[float]]] = {}
        start = 0
        for document in page:
            vectors[document.id] = flat[start : start + len(document.bindings)]
            start += len(document.bindings)
        return vectors

    async def _embed_one_by_one(self, page: list[MemoryDocument]) -> dict[str, list[list[float]]]:
        vectors: dict[str, list[list[float]]] = {}
        for document in page:
            try:
                vectors[document.id] = await self._storage.embedder.passages(document.bindings)
            except Exception as exc:  # this memory's failure must not stop the others
                self._fail(document, f"embedding failed: {exc}")
        return vectors

    async def _write(
        self, user_id: str, documents: list[MemoryDocument], vectors: dict[str, list[list[float]]]
    ) -> None:
        rows = [
            row for document in documents for row in vector_rows(document, vectors[document.id])
        ]
        try:
            await self._storage.vectors.upsert(user_id, rows)
        except Exception as exc:  # another user's rows may still be writable
            for document in documents:
                self._fail(document, f"writing vectors failed: {exc}")
            return
        # The memory service may run meanwhile: switch only documents that are still ready
        # and unchanged, so an update or delete made since they were read is not undone.
        current = {
            d.id: d for d in await self._repo.ready(user_id, [d.id for d in documents], None)
        }
        for document in documents:
            now = current.get(document.id)
            if now is None or (now.bindings, now.vector_collection) != (
                document.bindings,
                document.vector_collection,
            ):
                self._skip(document, "changed while it was migrated: run again")
                continue
            await self._repo.change(
                user_id,
                document.id,
                set={
                    "vector_ids": [row_id_for(document.id, b) for b in document.bindings],
                    "vector_collection": self._storage.vectors.collection,
                },
            )
            self._report.migrated += 1
            self._failures_in_a_row = 0

    def _fail(self, document: MemoryDocument, reason: str) -> None:
        log.warning("could not migrate %s: %s", document.id, reason)
        self._report.failed.append(MemoryIssue(document.user_id, document.id, reason))
        self._stuck.add(document.id)
        self._failures_in_a_row += 1
        if self._failures_in_a_row >= ABORT_AFTER_CONSECUTIVE_FAILURES:
            raise _Abort(f"{self._failures_in_a_row} memories failed in a row; last: {reason}")

    def _skip(self, document: MemoryDocument, reason: str) -> None:
        self._report.skipped.append(MemoryIssue(document.user_id, document.id, reason))
        self._stuck.add(document.id)


# -- old collections -------------------------------------------------------------------------


async def _old_collections(memories: Collection, target: str) -> dict[str, int]:
    """Ready memories per collection other than ``target``: one lookup per collection name
    (there are a handful), not a scan of every document."""
    found: dict[str, int] = {}
    while True:
        other = await memories.find_one(
            {"vector_collection": {"$nin": [target, None, *found]}, "state": "ready"}
        )
        if other is None:
            return found
        name = str(other["vector_collection"])
        found[name] = await memories.count({"vector_collection": name, "state": "ready"})


async def _retired(storage: MemoryStorage) -> list[str]:
    return [str(d["_id"]) for d in await storage.documents.collection(RETIRED).find({})]


async def _remember_retired(storage: MemoryStorage, found: dict[str, int], target: str) -> None:
    retired = storage.documents.collection(RETIRED)
    # Switching back to an earlier model makes its collection current again: never drop it.
    await retired.delete_one({"_id": target})
    now = clock.stamp(clock.now())
    for name in found:
        await retired.replace_one(
            {"_id": name}, {"_id": name, "retired_at": now, "replaced_by": target}, upsert=True
        )


async def _drop_old(storage: MemoryStorage, report: ReembedReport, drop: DropCollection) -> None:
    reason = _refusal(report)
    if reason is not None:
        report.drop_refused = reason
        return
    memories = storage.documents.collection(MEMORIES)
    retired = storage.documents.collection(RETIRED)
    in_use: list[str] = []
    for name in await _retired(storage):
        if name == report.target or not name.startswith(COLLECTION_PREFIX):
            continue  # the current collection, or not one Memoria ever made
        # Any document at all (a write still in flight included) keeps it alive.
        if await memories.count({"vector_collection": name}):
            in_use.append(name)
            continue
        if await drop(name):
            report.dropped.append(name)
        await retired.delete_one({"_id": name})
    if in_use:
        report.drop_refused = f"memories still point to {', '.join(in_use)}: run again"


def _refusal(report: ReembedReport) -> str | None:
    if not report.ok:
        return "some memories failed to migrate: only their old collection has their vectors"
    if report.skipped:
        return "some memories were not migrated yet"
    return None


def describe_issues(issues: Sequence[MemoryIssue], limit: int) -> list[str]:
    """Lines for a person: the first ``limit`` issues and how many more there are."""
    lines = [f"{i.memory_id} (user {i.user_id}): {i.reason}" for i in issues[:limit]]
    if len(issues) > limit:
        lines.append(f"... and {len(issues) - limit} more")
    return lines
