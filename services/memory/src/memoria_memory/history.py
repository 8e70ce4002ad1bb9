"""Chat history per thread: every non-transient message, in the order it was published."""

from __future__ import annotations

from typing import Any

from memoria_contracts.chat import ChatRecord
from memoria_memory.docstore import Collection, DuplicateKeyError

COLLECTION = "chat_messages"
SHOWN: dict[str, Any] = {"role": {"$ne": "tool"}, "tool_calls": None}
"""The messages people see: not a step's tool call or result, which are for the LLM.
A stored record matches it exactly when it is not :attr:`ChatRecord.tool_record` (a record
stores an empty ``tool_calls`` as null), which is how a message is judged one at a time."""
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

    async def save(self, user_id: str, thread_id: str, record: ChatRecord, seq: int) -> bool:
        """Idempotent: a redelivered message overwrites itself. A streamed message that was
        re-run after a crash keeps its first position in the thread. True when the message
        was not stored before."""
        document: dict[str, Any] = {
            "_id": record.id,
            "user_id": user_id,
            "thread_id": thread_id,
            "seq": seq,
            **record.model_dump(mode="json", by_alias=False, exclude={"id"}),
        }
        try:
            # Nearly every message is new: one write, without reading first.
            await self._messages.insert_one(document)
            return True
        except DuplicateKeyError:
            pass
        existing = await self._messages.find_one({"_id": record.id, "user_id": user_id})
        if existing:
            document["seq"] = existing["seq"]
        await self._messages.replace_one({"_id": record.id}, document, upsert=True)
        return False

    async def recent(
        self,
        user_id: str,
        thread_id: str,
        *,
        limit: int,
        exclude_cycle_id: str | None,
        only_chat_history: bool,
        after_seq: int | None = None,
        before_seq: int | None = None,
        tool_records: bool = True,
    ) -> list[ChatRecord]:
        """The newest ``limit`` messages (after ``after_seq``, before ``before_seq``, if
        given), oldest first."""
        query: dict[str, Any] = {"user_id": user_id, "thread_id": thread_id}
        if not tool_records:
            query.update(SHOWN)
        if only_chat_history:
            query["chat_history"] = True
        if exclude_cycle_id is not None:
            query["cycle_id"] = {"$ne": exclude_cycle_id}
        bounds = []
        if after_seq is not None:
            bounds.append({"seq": {"$gt": after_seq}})
        if before_seq is not None:
            bounds.append({"seq": {"$lt": before_seq}})
        if bounds:
            query["$and"] = bounds
        newest = await self._messages.find(query, sort=[("seq", -1)], limit=limit)
        return [_record(doc) for doc in reversed(newest)]

    async def position_of(
        self, user_id: str, thread_id: str, message_id: str
    ) -> tuple[int, str | None] | None:
        """Where a stored message of the thread sits (its ``seq``) and the cycle it belongs
        to; None when the thread has no such message (or it is another user's)."""
        found = await self._messages.find_one(
            {"_id": message_id, "user_id": user_id, "thread_id": thread_id}
        )
        return (int(found["seq"]), _record(found).cycle_id) if found else None

    async def newest_sequenced(
        self, user_id: str, thread_id: str, *, limit: int
    ) -> list[tuple[int, ChatRecord]]:
        """The newest ``limit`` chat-history messages with their positions, oldest first."""
        query = {"user_id": user_id, "thread_id": thread_id, "chat_history": True}
        newest = await self._messages.find(query, sort=[("seq", -1)], limit=limit)
        return [(doc["seq"], _record(doc)) for doc in reversed(newest)]

    async def sequenced_between(
        self, user_id: str, thread_id: str, *, after_seq: int, before_seq: int, limit: int
    ) -> list[tuple[int, ChatRecord]]:
        """Chat-history messages with ``after_seq < seq < before_seq``, oldest first."""
        query = {
            "user_id": user_id,
            "thread_id": thread_id,
            "chat_history": True,
            "$and": [{"seq": {"$gt": after_seq}}, {"seq": {"$lt": before_seq}}],
        }
        found = await self._messages.find(query, sort=[("seq", 1)], limit=limit)
        return [(doc["seq"], _record(doc)) for doc in found]


def _record(document: dict[str, Any]) -> ChatRecord:
    return ChatRecord.model_validate({**document, "id": document["_id"]})
