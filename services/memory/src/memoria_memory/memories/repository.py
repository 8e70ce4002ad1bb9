"""Memory documents, their change history and the set of users, in the document store.

Every query names the user: there is no method that reads or writes a memory without an
owner in its filter, which is how ownership holds whatever the caller passes as an id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memoria_contracts.memory import MemoryChange, MemoryType
from memoria_memory import one_off
from memoria_memory.docstore import Collection, DocumentStore, DuplicateKeyError
from memoria_memory.memories import clock
from memoria_memory.memories.documents import MemoryDocument
from memoria_memory.memories.window import NO_WINDOW, TimeWindow

MEMORIES = "memories"
CHANGES = "memory_changes"
USERS = "memory_users"
MIGRATIONS = "memory_migrations"
"""One document per one-off pass over the memories that has finished (its name is the id)."""


class MemoryRepository:
    def __init__(self, store: DocumentStore) -> None:
        self._memories: Collection = store.collection(MEMORIES)
        self._changes: Collection = store.collection(CHANGES)
        self._users: Collection = store.collection(USERS)
        self._migrations: Collection = store.collection(MIGRATIONS)

    async def setup(self) -> None:
        await self._memories.ensure_index([("user_id", 1), ("state", 1), ("creation_datetime", -1)])
        # For the search path's "user_id = ? AND _id IN (...)" (ready, touch): without it,
        # SQLite's planner prefers the index above and reads every memory of the user
        # (bench/memory_search.py, docs/benchmarks.md).
        await self._memories.ensure_index([("user_id", 1), ("_id", 1), ("state", 1)])
        await self._memories.ensure_index([("user_id", 1), ("content_key", 1), ("state", 1)])
        await self._memories.ensure_index([("state", 1), ("updated_at", 1)])
        await self._memories.ensure_index([("vector_collection", 1)])
        await self._changes.ensure_index([("user_id", 1), ("memory_id", 1), ("at", 1)])

    # -- memories ---------------------------------------------------------------------------

    async def get(self, user_id: str, memory_id: str) -> MemoryDocument | None:
        found = await self._memories.find_one({"_id": memory_id, "user_id": user_id})
        return MemoryDocument.from_stored(found) if found else None

    async def saying(self, user_id: str, content_key: str) -> MemoryDocument | None:
        """A ready memory of the user whose content has this key (``ids.content_key_for``)."""
        found = await self._memories.find_one(
            {"user_id": user_id, "content_key": content_key, "state": "ready"}
        )
        return MemoryDocument.from_stored(found) if found else None

    async def keyless(self, limit: int) -> list[MemoryDocument]:
        """Up to ``limit`` ready memories written before content keys existed (ADR 0019)."""
        found = await self._memories.find({"content_key": None, "state": "ready"}, limit=limit)
        return [MemoryDocument.from_stored(document) for document in found]

    async def migrated(self, name: str) -> bool:
        """Whether the one-off pass ``name`` over the memories has finished."""
        return await one_off.finished(self._migrations, name)

    async def mark_migrated(self, name: str) -> None:
        await one_off.mark_finished(self._migrations, name)

    async def ready_in(self, collection: str, *, after: str, limit: int) -> list[MemoryDocument]:
        """Up to ``limit`` ready memories (of every user) whose vectors are in
        ``collection``, in id order from just after ``after``: a pass over them that can
        stop anywhere and go on from the last id it finished."""
        found = await self._memories.find(
            {"vector_collection": collection, "state": "ready", "_id": {"$gt": after}},
            sort=[("_id", 1)],
            limit=limit,
        )
        return [MemoryDocument.from_stored(document) for document in found]

    async def progress(self, name: str) -> str:
        """Where the resumable pass ``name`` got to (``""`` before it started)."""
        found = await self._migrations.find_one({"_id": f"{name}.progress"})
        return str(found["after"]) if found else ""

    async def save_progress(self, name: str, after: str) -> None:
        key = f"{name}.progress"
        await self._migrations.replace_one({"_id": key}, {"_id": key, "after": after}, upsert=True)

    async def give_content_key(self, document: MemoryDocument, content_key: str) -> bool:
        """Set a keyless memory's key. Only while it still has none: a write since it was
        read has set the key of its new content, which this one would overwrite."""
        return await self._memories.update_one(
            {"_id": document.id, "user_id": document.user_id, "content_key": None},
            set={"content_key": content_key},
        )

    async def insert(self, document: MemoryDocument) -> bool:
        """False when a document with this id exists already (a repeated save)."""
        try:
            await self._memories.insert_one(document.to_stored())
        except DuplicateKeyError:
            return False
        return True

    async def change(
        self,
        user_id: str,
        memory_id: str,
        *,
        set: Mapping[str, Any] | None = None,
        unset: Sequence[str] = (),
    ) -> bool:
        return await self._memories.update_one(
            {"_id": memory_id, "user_id": user_id}, set=set, unset=unset
        )

    async def remove(self, user_id: str, memory_id: str) -> None:
        await self._memories.delete_one({"_id": memory_id, "user_id": user_id})

    async def ready(
        self,
        user_id: str,
        memory_ids: Sequence[str],
        memory_type: MemoryType | None,
        window: TimeWindow = NO_WINDOW,
    ) -> list[MemoryDocument]:
        query: dict[str, Any] = {
            "user_id": user_id,
            "state": "ready",
            "_id": {"$in": list(memory_ids)},
        }
        if memory_type is not None:
            query["memory_type"] = memory_type
        for clause in window.clauses():
            query.update(clause)
        return [MemoryDocument.from_stored(d) for d in await self._memories.find(query)]

    async def newest(
        self,
        user_id: str,
        *,
        memory_type: MemoryType | None,
        limit: int,
        before: tuple[str, str] | None = None,
        exclude: Sequence[str] = (),
        window: TimeWindow = NO_WINDOW,
    ) -> list[MemoryDocument]:
        """Ready memories, newest first; ``before`` = (creation stamp, id) of the last one
        already seen (keyset pagination: stable while memories are added)."""
        clauses: list[dict[str, Any]] = [{"user_id": user_id}, {"state": "ready"}]
        clauses.extend(window.clauses())
        if memory_type is not None:
            clauses.append({"memory_type": memory_type})
        if exclude:
            clauses.append({"_id": {"$nin": list(exclude)}})
        if before is not None:
            created, last_id = before
            clauses.append(
                {
                    "$or": [
                        {"creation_datetime": {"$lt": created}},
                        {"creation_datetime": created, "_id": {"$lt": last_id}},
                    ]
                }
            )
        found = await self._memories.find(
            {"$and": clauses}, sort=[("creation_datetime", -1), ("_id", -1)], limit=limit
        )
        return [MemoryDocument.from_stored(d) for d in found]

    async def touch(self, user_id: str, memory_ids: Sequence[str], when: str) -> None:
        if memory_ids:
            await self._memories.update_many(
                {"user_id": user_id, "_id": {"$in": list(memory_ids)}},
                set={"last_accessed": when},
            )

    async def of_user(self, user_id: str) -> list[MemoryDocument]:
        return [
            MemoryDocument.from_stored(d) for d in await self._memories.find({"user_id": user_id})
        ]

    async def unsettled(self, updated_before: str | None) -> list[MemoryDocument]:
        """Documents whose write did not finish (all of them, or those not touched since
        ``updated_before``: younger ones may still be in flight)."""
        query: dict[str, Any] = {"state": {"$ne": "ready"}}
        if updated_before is not None:
            query["updated_at"] = {"$lt": updated_before}
        return [MemoryDocument.from_stored(d) for d in await self._memories.find(query)]

    async def count_in_other_collections(self, collection: str) -> int:
        return await self._memories.count(
            {"vector_collection": {"$nin": [collection, None]}, "state": "ready"}
        )

    async def in_other_collections(self, collection: str, limit: int) -> list[MemoryDocument]:
        found = await self._memories.find(
            {"vector_collection": {"$nin": [collection, None]}, "state": "ready"}, limit=limit
        )
        return [MemoryDocument.from_stored(d) for d in found]

    # -- users ------------------------------------------------------------------------------

    async def remember_user(self, user_id: str) -> None:
        """Users who ever had a memory: the reconciler looks for orphan vectors per user."""
        await self._users.replace_one({"_id": user_id}, {"_id": user_id}, upsert=True)

    async def users(self) -> list[str]:
        return [str(d["_id"]) for d in await self._users.find({}, sort=[("_id", 1)])]

    # -- history ----------------------------------------------------------------------------

    async def record(self, user_id: str, change: MemoryChange) -> None:
        """Idempotent: a change is stored under its id, so finishing a write twice records
        it once."""
        document = {"user_id": user_id, **change.model_dump(mode="json")}
        document["_id"] = change.change_id
        document["at"] = clock.stamp(change.at)  # fixed width: sorts as text
        await self._changes.replace_one({"_id": change.change_id}, document, upsert=True)

    async def changes(self, user_id: str, memory_id: str) -> list[MemoryChange]:
        found = await self._changes.find(
            {"user_id": user_id, "memory_id": memory_id}, sort=[("at", 1), ("_id", 1)]
        )
        return [MemoryChange.model_validate(d) for d in found]

    async def change_record(self, user_id: str, change_id: str) -> MemoryChange | None:
        found = await self._changes.find_one({"_id": change_id, "user_id": user_id})
        return MemoryChange.model_validate(found) if found else None
