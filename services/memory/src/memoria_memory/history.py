"""Chat history per thread: every non-transient message, in the order it was published."""

from __future__ import annotations

from typing import Any

from memoria_contracts.chat import ChatRecord
from memoria_memory.docstore import Collection

COLLECTION = "chat_messages"
_SEQ_SHIFT = 1_000_000  # stream ids are "<ms>-<n>"; n stays far below this within one ms


def stream_sequence(entry_id: str) -> int:
    """A sortable number from a Redis stream entry id (publication order)."""
    millis, _, counter = entry_id.partition("-")
    return int(millis) * _SEQ_SHIFT + int(counter or 0)


class HistoryRepository:
    def __init__(self, collection: Collection) -> None:
        self._messages = collection

    async def setup(self) -> None:
        await self._messages.ensure_index([("user_id", 1), ("thread_id", 1), ("seq", 1)])

    async def save(self, user_id: str, thread_id: str, record: ChatRecord, seq: int) -> None:
        """Idempotent: a redelivered message overwrites itself. A streamed message that was
        re-run after a crash keeps its first position in the thread."""
        existing = await self._messages.find_one({"_id": record.id, "user_id": user_id})
        document: dict[str, Any] = {
            "_id": record.id,
            "user_id": user_id,
            "thread_id": thread_id,
            "seq": existing["seq"] if existing else seq,
            **record.model_dump(mode="json", by_alias=False, exclude={"id"}),
        }
        await self._messages.replace_one({"_id": record.id}, document, upsert=True)

    async def recent(
        self,
        user_id: str,
        thread_id: str,
        *,
        limit: int,
        exclude_cycle_id: str | None,
        only_chat_history: bool,
    ) -> list[ChatRecord]:
        """The newest ``limit`` messages, oldest first."""
        query: dict[str, Any] = {"user_id": user_id, "thread_id": thread_id}
        if only_chat_history:
            query["chat_history"] = True
        if exclude_cycle_id is not None:
            query["cycle_id"] = {"$ne": exclude_cycle_id}
        newest = await self._messages.find(query, sort=[("seq", -1)], limit=limit)
        return [ChatRecord.model_validate({**doc, "id": doc["_id"]}) for doc in reversed(newest)]
