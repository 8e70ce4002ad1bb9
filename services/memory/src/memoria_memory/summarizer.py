"""Per-thread history summaries (ADR 11), kept up to date in the background.

Storing a message schedules an update of its thread's summary a little later (debounced:
a burst of messages, one update); ``history.query`` only reads the stored summary. An
update reads a bounded window — the newest verbatim + structured messages — and, for the
archive, only the messages that left that window since the last update (``archived_seq``),
so its cost does not grow with the thread. Updates are deterministic: two replicas, or a
re-run, write the same document.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from memoria_contracts.chat import ChatRecord, utcnow
from memoria_contracts.history import HistorySummary, SummaryTurn
from memoria_memory import summaries
from memoria_memory.docstore import Collection
from memoria_memory.history import HistoryRepository
from memoria_runtime.health import stop_task

log = logging.getLogger("memoria.memory.summaries")

COLLECTION = "history_summaries"
ARCHIVE_BATCH = 500
"""Messages compressed into the archive per read; an update reads batches until done."""


@dataclass(frozen=True)
class SummaryBounds:
    verbatim: int
    structured: int
    archive_chars: int


@dataclass(frozen=True)
class StoredSummary:
    summary: HistorySummary
    until_seq: int
    """Position of the newest message the summary covers; newer ones are given verbatim."""


def _doc_id(user_id: str, thread_id: str) -> str:
    return f"{user_id}\x1f{thread_id}"


class SummaryStore:
    def __init__(self, collection: Collection) -> None:
        self._documents = collection

    async def get(self, user_id: str, thread_id: str) -> StoredSummary | None:
        document = await self._documents.find_one(
            {"_id": _doc_id(user_id, thread_id), "user_id": user_id}
        )
        if document is None:
            return None
        summary = HistorySummary(
            turns=[SummaryTurn.model_validate(turn) for turn in document["turns"]],
            archive=document["archive"],
        )
        return StoredSummary(summary=summary, until_seq=document["until_seq"])

    async def raw(self, user_id: str, thread_id: str) -> dict[str, Any] | None:
        return await self._documents.find_one(
            {"_id": _doc_id(user_id, thread_id), "user_id": user_id}
        )

    async def put(self, user_id: str, thread_id: str, fields: dict[str, Any]) -> None:
        document = {
            "_id": _doc_id(user_id, thread_id),
            "user_id": user_id,
            "thread_id": thread_id,
            **fields,
        }
        await self._documents.replace_one({"_id": document["_id"]}, document, upsert=True)


class HistorySummarizer:
    def __init__(
        self,
        history: HistoryRepository,
        store: SummaryStore,
        bounds: SummaryBounds,
        delay_s: float,
    ) -> None:
        self._history = history
        self._store = store
        self._bounds = bounds
        self._delay_s = delay_s
        self._scheduled: dict[tuple[str, str], asyncio.Task[None]] = {}

    def schedule(self, user_id: str, thread_id: str) -> None:
        """Update the thread's summary after the delay, once for messages stored meanwhile.
        Never waited for: the message handler returns at once."""
        key = (user_id, thread_id)
        if key in self._scheduled:
            return  # the pending update will read this message too
        self._scheduled[key] = asyncio.create_task(self._later(key))

    async def _later(self, key: tuple[str, str]) -> None:
        try:
            await asyncio.sleep(self._delay_s)
            del self._scheduled[key]  # a message stored from now on schedules another update
            await self.update(*key)
        except asyncio.CancelledError:
            raise
        except Exception:  # a failed update waits for the thread's next message
            log.exception("summary of %s/%s failed", *key)
        finally:
            # Only this task's entry: a message stored during the update scheduled another.
            if self._scheduled.get(key) is asyncio.current_task():
                del self._scheduled[key]

    async def aclose(self) -> None:
        await asyncio.gather(*(stop_task(task) for task in list(self._scheduled.values())))
        self._scheduled.clear()

    async def update(self, user_id: str, thread_id: str) -> None:
        """Recompute the thread's summary from the stored history. Layers meet at turn
        (cycle) boundaries, so no turn is split between two of them: the verbatim part
        starts at the turn of its oldest message, and a turn that began before the window
        goes to the archive whole."""
        bounds = self._bounds
        size = bounds.verbatim + bounds.structured
        # One message more than the window: it says whether the window's first turn began
        # before it (then that turn is archived whole rather than summarized in half).
        window = await self._history.newest_sequenced(user_id, thread_id, limit=size + 1)
        full = len(window) > size  # older messages exist
        before = window.pop(0)[1] if full else None
        if len(window) <= bounds.verbatim:
            return  # everything is still given verbatim
        verbatim_from = _turn_start(window, len(window) - bounds.verbatim)
        split = before is not None and _same_turn(before, window[0][1])
        structured_from = min(_turn_end(window, 0) if split else 0, verbatim_from)
        summarized = window[structured_from:verbatim_from]
        previous = await self._store.raw(user_id, thread_id) or {}
        archive = str(previous.get("archive", ""))
        archived_seq = int(previous.get("archived_seq", -1))
        if full:
            # What left the structured part since the last update goes to the archive.
            archive, archived_seq = await self._archive(
                user_id, thread_id, archive, archived_seq, before_seq=window[structured_from][0]
            )
        until_seq = summarized[-1][0] if summarized else archived_seq
        if until_seq < 0 or int(previous.get("until_seq", -1)) > until_seq:
            return  # nothing to summarize yet, or another replica wrote from a newer window
        turns = summaries.structured(record for _, record in summarized)
        await self._store.put(
            user_id,
            thread_id,
            {
                "turns": [turn.model_dump(mode="json") for turn in turns],
                "archive": archive,
                "until_seq": until_seq,
                "archived_seq": archived_seq,
                "updated_at": utcnow().isoformat(),
            },
        )

    async def _archive(
        self, user_id: str, thread_id: str, archive: str, archived_seq: int, *, before_seq: int
    ) -> tuple[str, int]:
        """Append the turns stored after ``archived_seq`` and before ``before_seq`` (a turn
        boundary) to the archive, a batch at a time, each batch cut at a turn boundary."""
        while True:
            batch = await self._history.sequenced_between(
                user_id,
                thread_id,
                after_seq=archived_seq,
                before_seq=before_seq,
                limit=ARCHIVE_BATCH,
            )
            if not batch:
                return archive, archived_seq
            if len(batch) == ARCHIVE_BATCH:  # more follow: end at the last complete turn
                batch = batch[: _turn_start(batch, len(batch) - 1)] or batch
            lines = summaries.archive_lines(record for _, record in batch)
            archive = summaries.bounded_archive(archive, lines, self._bounds.archive_chars)
            archived_seq = batch[-1][0]


Sequenced = list[tuple[int, ChatRecord]]


def _same_turn(one: ChatRecord, other: ChatRecord) -> bool:
    return one.cycle_id is not None and one.cycle_id == other.cycle_id


def _turn_start(messages: Sequenced, index: int) -> int:
    """The index where the turn (cycle) of ``messages[index]`` begins."""
    cycle = messages[index][1].cycle_id
    while index > 0 and cycle is not None and messages[index - 1][1].cycle_id == cycle:
        index -= 1
    return index


def _turn_end(messages: Sequenced, index: int) -> int:
    """The index just after the turn (cycle) of ``messages[index]``."""
    cycle = messages[index][1].cycle_id
    index += 1
    while index < len(messages) and cycle is not None and messages[index][1].cycle_id == cycle:
        index += 1
    return index
