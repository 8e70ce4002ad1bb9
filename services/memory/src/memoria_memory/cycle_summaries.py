"""How each ended cycle went — its actions, end reason, usage and duration — kept for as
long as the history is, so a thread drawn again after a reload shows each reply's summary.

The cycle log (cycle_log.py) holds the same end, but only for its retention period: it is
for looking into recent cycles, and this is part of the conversation as people see it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection as Many
from datetime import datetime
from typing import Final

from memoria_contracts.cycles import CYCLE_PREFIX, MESSAGE_PREFIX
from memoria_contracts.events import CycleEnded, CycleSummary
from memoria_memory.docstore import Collection, Document, DuplicateKeyError
from memoria_memory.memories import clock

COLLECTION: Final = "cycle_summaries"


def _message_of(cycle_id: str) -> str:
    """The id of the user message that started a cycle (the inverse of ``cycle_id_for``)."""
    return f"{MESSAGE_PREFIX}{cycle_id.removeprefix(CYCLE_PREFIX)}"


class CycleSummaries:
    def __init__(self, summaries: Collection, history: Collection) -> None:
        self._summaries = summaries
        self._history = history  # where the user message that started the cycle is

    async def setup(self) -> None:
        await self._summaries.ensure_index([("user_id", 1), ("cycle_id", 1)])

    async def record(
        self, user_id: str, thread_id: str, cycle_id: str, ended: CycleEnded, at: datetime
    ) -> None:
        """Keep the end of a cycle. Idempotent: the first end seen is kept (the decision
        service may announce an end again after a crash)."""
        started = await self._history.find_one({"_id": _message_of(cycle_id), "user_id": user_id})
        duration_ms = None
        if started is not None and started.get("created_at"):
            elapsed = at - clock.parse(started["created_at"])
            duration_ms = max(0, round(elapsed.total_seconds() * 1000))
        summary = CycleSummary(
            cycle_id=cycle_id,
            actions=ended.actions,
            reason=ended.reason,
            usage=ended.usage,
            ended_at=at,
            duration_ms=duration_ms,
        )
        document: Document = {
            "_id": f"{user_id}/{cycle_id}",
            "user_id": user_id,
            "thread_id": thread_id,
            "cycle_id": cycle_id,
            "summary": summary.model_dump(mode="json"),
        }
        with contextlib.suppress(DuplicateKeyError):
            await self._summaries.insert_one(document)

    async def of(self, user_id: str, thread_id: str, cycle_ids: Many[str]) -> list[CycleSummary]:
        """The summaries of those of ``cycle_ids`` that ended (the user's, in that thread)."""
        if not cycle_ids:
            return []
        found = await self._summaries.find(
            {"user_id": user_id, "thread_id": thread_id, "cycle_id": {"$in": sorted(cycle_ids)}}
        )
        return [CycleSummary.model_validate(document["summary"]) for document in found]
