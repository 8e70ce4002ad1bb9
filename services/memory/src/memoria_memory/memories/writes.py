"""Save, update and delete, in one fixed order and safe to repeat at every step.

Save: document (``writing``) → one vector row per binding, pointing to the document →
document updated with the row ids (``ready``). Update with new bindings and delete follow
the same pattern: mark the document, fix the vectors, settle the document. Every step is
idempotent (deterministic ids, upserts, deletes of known ids), so finishing a write is the
same code whether the writer goes on, a retry arrives, or the reconciler finds it after a
crash (:meth:`MemoryWriter.finish`). The change history is recorded before a write settles,
under an id fixed when it started, so a repeated finish records it once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from memoria_contracts.memory import (
    MAX_BINDING_CHARS,
    ContentKind,
    Memory,
    MemoryChange,
    MemoryDelete,
    MemoryDeleted,
    MemoryFailure,
    MemorySave,
    MemorySaved,
    MemoryUpdate,
    MemoryUpdated,
)
from memoria_memory.embedding import Embedder
from memoria_memory.faults import Faults
from memoria_memory.memories import clock
from memoria_memory.memories.documents import MemoryDocument, PendingWrite
from memoria_memory.memories.ids import content_key_for, memory_id_for, row_ids_for
from memoria_memory.memories.lexical_index import text_rows, vector_rows
from memoria_memory.memories.repository import MemoryRepository
from memoria_memory.memories.row_writes import RowWrites
from memoria_memory.vectors import VectorStore

log = logging.getLogger("memoria.memory.writes")

UNWRITABLE: Final = (ValueError, TypeError, ArithmeticError)
"""What a write raises when its data cannot be stored, however often it is tried (a value
a store or a conversion refuses); a broken store or embedder raises other errors."""


def not_found(memory_id: str) -> MemoryFailure:
    return MemoryFailure(
        code="not_found", error_message=f"memory {memory_id} not found", memory_id=memory_id
    )


def unique(bindings: Sequence[str]) -> list[str]:
    """Bindings in their first order, each once (two equal bindings are one vector row)."""
    return list(dict.fromkeys(bindings))


def rekeyed(bindings: Sequence[str], old: Any, new: Any) -> list[str]:
    """The bindings once a text content changes and no new bindings are given: the binding
    that was the old text (the chat keys a fact by its own words first) becomes the new
    text, so the memory is found by what it says now; bindings chosen apart from the text
    stay. JSON content has no such binding."""
    if not isinstance(old, str) or not isinstance(new, str) or old == new:
        return list(bindings)
    said = new.strip()[:MAX_BINDING_CHARS]
    return unique([said if binding.strip() == old.strip() else binding for binding in bindings])


def kind_of(content: Any) -> ContentKind:
    return "text" if isinstance(content, str) else "json"


@dataclass
class MemoryWriter:
    repo: MemoryRepository
    vectors: VectorStore
    embedder: Embedder
    faults: Faults
    row_writes: RowWrites = field(init=False)

    def __post_init__(self) -> None:
        # Concurrent saves of one user (a bulk import) share their vector writes.
        self.row_writes = RowWrites(self.vectors)

    # -- save -------------------------------------------------------------------------------

    async def save(
        self, user_id: str, request: MemorySave, *, cycle_id: str | None
    ) -> MemorySaved | MemoryFailure:
        memory_id = memory_id_for(user_id, request.idempotency_key)
        document = await self.repo.get(user_id, memory_id)
        created = False
        if document is None:
            content_key = content_key_for(request.content)
            if request.reuse_same_content:
                said = await self.repo.saying(user_id, content_key)
                if said is not None:
                    return MemorySaved(memory_id=said.id, created=False, memory=said.to_memory())
            document = self._new_document(user_id, memory_id, request, cycle_id, content_key)
            await self.repo.remember_user(user_id)
            created = await self.repo.insert(document)
            if not created:  # an identical save got there first
                document = await self.repo.get(user_id, memory_id)
                if document is None:
                    return not_found(memory_id)
            self.faults.point("save.after_document")
        if document.state == "deleting":
            return not_found(memory_id)
        if document.state == "writing":
            given = request.vectors if created else None
            try:
                finished = await self.finish(document, vectors=given, embedder_id=request.embedder)
            except UNWRITABLE:
                if created:  # the caller is told it failed: leave nothing half-written
                    await self._discard(document)
                raise
            if finished is None:
                return not_found(memory_id)
            document = finished
        return MemorySaved(memory_id=memory_id, created=created, memory=document.to_memory())

    def _new_document(
        self,
        user_id: str,
        memory_id: str,
        request: MemorySave,
        cycle_id: str | None,
        content_key: str,
    ) -> MemoryDocument:
        now = clock.stamp(clock.now())
        created = clock.stamp(request.creation_datetime) if request.creation_datetime else now
        return MemoryDocument(
            id=memory_id,
            user_id=user_id,
            memory_type=request.memory_type,
            content_kind=request.content_kind,
            content=request.content,
            bindings=unique(request.bindings),
            state="writing",
            pending=PendingWrite(
                op="save",
                change_id=f"{memory_id}.created",
                started_at=now,
                source=request.source,
                cycle_id=cycle_id,
            ),
            creation_datetime=created,
            last_accessed=now,
            updated_at=now,
            cycle_id=cycle_id,
            content_key=content_key,
        )

    # -- update -----------------------------------------------------------------------------

    async def update(
        self, user_id: str, request: MemoryUpdate, *, cycle_id: str | None, request_id: str
    ) -> MemoryUpdated | MemoryFailure:
        document = await self.repo.get(user_id, request.memory_id)
        if document is not None and document.state == "writing":
            document = await self.finish(document)  # settle an interrupted write first
        if document is None or document.state != "ready":
            return not_found(request.memory_id)
        before = document.to_memory()
        content = document.content if request.content is None else request.content
        changes: dict[str, Any] = {
            "content": content,
            "content_kind": request.content_kind
            or (document.content_kind if request.content is None else kind_of(content)),
            "memory_type": request.memory_type or document.memory_type,
            "bindings": rekeyed(document.bindings, document.content, content)
            if request.bindings is None
            else unique(request.bindings),
        }
        if all(getattr(document, field) == value for field, value in changes.items()):
            return MemoryUpdated(
                memory_id=document.id,
                old_content=before.content,
                new_content=before.content,
                memory=before,
            )
        now = clock.stamp(clock.now())
        changes |= {
            "updated_at": now,
            "last_accessed": now,
            "content_key": content_key_for(content),
        }
        change_id = f"{document.id}.updated.{request_id}"
        if set(changes["bindings"]) == set(document.bindings):
            updated = document.model_copy(update=changes)
            # The vectors stay (same bindings); the rows' texts carry the content. Indexed
            # before the document changes: a crash in between leaves the update to be
            # repeated, never a document whose words search cannot find.
            await self.vectors.index_text(user_id, text_rows(updated))
            await self.repo.record(
                user_id,
                MemoryChange(
                    change_id=change_id,
                    memory_id=document.id,
                    kind="updated",
                    at=clock.parse(now),
                    source=request.source,
                    cycle_id=cycle_id,
                    old=before,
                    new=updated.to_memory(),
                ),
            )
            await self.repo.change(user_id, document.id, set=changes)
            return self._updated(before, updated)
        kept = set(row_ids_for(document.id, changes["bindings"]))
        pending = PendingWrite(
            op="update",
            change_id=change_id,
            started_at=now,
            source=request.source,
            cycle_id=cycle_id,
            stale=[row for row in document.vector_ids if row not in kept],
            before=before,
        )
        writing = {**changes, "state": "writing", "pending": pending.model_dump(mode="json")}
        await self.repo.change(user_id, document.id, set=writing)
        self.faults.point("update.after_document")
        settled = await self.finish(
            document.model_copy(update={**changes, "state": "writing", "pending": pending})
        )
        if settled is None:
            return not_found(request.memory_id)
        return self._updated(before, settled)

    @staticmethod
    def _updated(before: Memory, after: MemoryDocument) -> MemoryUpdated:
        return MemoryUpdated(
            memory_id=after.id,
            old_content=before.content,
            new_content=after.content,
            memory=after.to_memory(),
        )

    # -- delete -----------------------------------------------------------------------------

    async def delete(
        self, user_id: str, request: MemoryDelete, *, cycle_id: str | None
    ) -> MemoryDeleted | MemoryFailure:
        document = await self.repo.get(user_id, request.memory_id)
        if document is None:
            return await self._deleted_before(user_id, request.memory_id)
        if document.state != "deleting":
            now = clock.stamp(clock.now())
            pending = PendingWrite(
                op="delete",
                change_id=f"{document.id}.deleted",
                started_at=now,
                source=request.source,
                cycle_id=cycle_id,
                before=document.to_memory(),
            )
            await self.repo.change(
                user_id,
                document.id,
                set={
                    "state": "deleting",
                    "pending": pending.model_dump(mode="json"),
                    "updated_at": now,
                },
            )
            document = document.model_copy(update={"state": "deleting", "pending": pending})
            self.faults.point("delete.after_mark")
        gone = await self._finish_delete(document)
        return MemoryDeleted(memory_id=gone.memory_id, deleted_content=gone.content, memory=gone)

    async def _deleted_before(self, user_id: str, memory_id: str) -> MemoryDeleted | MemoryFailure:
        """A repeated delete (a retry, a redelivery) answers like the first one did."""
        record = await self.repo.change_record(user_id, f"{memory_id}.deleted")
        if record is None or record.old is None:
            return not_found(memory_id)
        return MemoryDeleted(
            memory_id=record.old.memory_id, deleted_content=record.old.content, memory=record.old
        )

    # -- finishing a write ------------------------------------------------------------------

    async def finish(
        self,
        document: MemoryDocument,
        *,
        vectors: Sequence[Sequence[float]] | None = None,
        embedder_id: str | None = None,
    ) -> MemoryDocument | None:
        """Bring a ``writing`` or ``deleting`` document to its end state; returns the ready
        document, or None once it is deleted. ``vectors`` (one per binding, made by
        ``embedder_id``) spare an embedding when they come from this service's embedder."""
        if document.state == "deleting":
            await self._finish_delete(document)
            return None
        if document.state == "ready" or document.pending is None:
            return document
        pending = document.pending
        if (
            vectors is None
            or embedder_id != self.embedder.id
            or len(vectors) != len(document.bindings)
        ):
            vectors = await self.embedder.passages(document.bindings)
        rows = vector_rows(document, vectors)
        await self.row_writes.upsert(document.user_id, rows)
        self.faults.point("save.after_vectors" if pending.op == "save" else "update.after_vectors")
        if pending.stale:
            await self.vectors.delete(document.user_id, pending.stale)
        ready = document.model_copy(
            update={
                "state": "ready",
                "pending": None,
                "vector_ids": [row.id for row in rows],
                "vector_collection": self.vectors.collection,
            }
        )
        await self.repo.record(
            document.user_id,
            MemoryChange(
                change_id=pending.change_id,
                memory_id=document.id,
                kind="created" if pending.op == "save" else "updated",
                at=clock.parse(pending.started_at),
                source=pending.source,
                cycle_id=pending.cycle_id,
                old=pending.before,
                new=ready.to_memory(),
            ),
        )
        await self.repo.change(
            document.user_id,
            document.id,
            set={
                "state": "ready",
                "vector_ids": ready.vector_ids,
                "vector_collection": ready.vector_collection,
            },
            unset=["pending"],
        )
        return ready

    async def _discard(self, document: MemoryDocument) -> None:
        """Remove a save that can never finish, and whatever rows it wrote."""
        log.error("discarding the save of %s: its data cannot be stored", document.id)
        await self.vectors.delete(document.user_id, row_ids_for(document.id, document.bindings))
        await self.repo.remove(document.user_id, document.id)

    async def _finish_delete(self, document: MemoryDocument) -> Memory:
        pending = document.pending
        before = pending.before if pending and pending.before else document.to_memory()
        # Rows of any binding the memory ever settled with, and of its current bindings (a
        # save that crashed before settling may have written them).
        rows = set(row_ids_for(document.id, document.bindings))
        if document.vector_collection in (None, self.vectors.collection):
            rows |= set(document.vector_ids)
        await self.vectors.delete(document.user_id, sorted(rows))
        self.faults.point("delete.after_vectors")
        await self.repo.record(
            document.user_id,
            MemoryChange(
                change_id=pending.change_id if pending else f"{document.id}.deleted",
                memory_id=document.id,
                kind="deleted",
                at=clock.parse(pending.started_at if pending else document.updated_at),
                source=pending.source if pending else "reconciler",
                cycle_id=pending.cycle_id if pending else None,
                old=before,
            ),
        )
        await self.repo.remove(document.user_id, document.id)
        return before
