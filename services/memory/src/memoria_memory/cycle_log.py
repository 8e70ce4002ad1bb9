"""The cycle log: every event of a thought cycle, in order, so a cycle can return its trace.

The memory service reads ``chat.in``, ``actions`` and ``actions.done`` in its own consumer
group (so it takes no entry from the decision service or the workers) and ``chat.out`` in
its history group; each event that belongs to a cycle becomes one document here.

What is kept, and why:

* **Compact payloads.** Streamed ``chat.delta`` pieces are dropped: a cycle streams a
  piece per token, and the complete ``chat.message`` with the same id always follows them,
  so the trace keeps the final message, not every token. An ``action.requested`` keeps its
  step and action but not its ``context`` (a copy of the conversation whose messages are in
  the trace already); an ``action.completed`` keeps its outcome without the messages it
  carries (posted on ``chat.out`` too).
* **Idempotent, at-least-once.** Each document's ``_id`` says what the event *is* —
  the user message, the chat message of an id, the request or completion of a step, the end
  — rather than which envelope carried it. A redelivered entry has the same event id and so
  the same key; an event a service publishes again after a crash (the decision service
  republishes a pending step and re-announces an end, with new event ids) has the same key
  too, so neither appears twice. The first one seen is kept (its event id, time and place);
  a chat message published again keeps its first place and takes the newest content, as the
  history does.
* **Order.** Events are sorted by their stream entry id's milliseconds — every id is the
  broker's own clock, so entries of different streams compare — then by the envelope's time
  (events one service published within the same millisecond), then by the entry's sequence.
* **One trace id.** Each event keeps the trace id of its envelope's ``traceparent``; a cycle
  is one OpenTelemetry trace, and a trace shows it.
* **Retention.** Events older than ``MEMORIA_CYCLE_TRACE_RETENTION_DAYS`` are deleted by
  :meth:`CycleLog.purge`, which the memory service runs at start and then periodically: a
  trace is for looking into recent cycles, not a second copy of the history.

Every read names the user: another user's cycle of the same id is not found.
"""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import datetime, timedelta
from typing import Any, Final

from memoria_contracts.chat import ChatRecord
from memoria_contracts.cycles import MAX_TRACE_EVENTS, Cycle, CycleEvent, cycle_id_for
from memoria_contracts.events import (
    ActionCompleted,
    ActionRequested,
    ChatPosted,
    CycleEnded,
    Envelope,
    UserMessageReceived,
)
from memoria_memory.docstore import Collection, Document, DocumentStore, DuplicateKeyError
from memoria_memory.memories import clock

logger = logging.getLogger("memoria.memory")

COLLECTION: Final = "cycle_events"
STREAM_PREFIX: Final = "memoria:"
_TRACEPARENT: Final = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
_NO_TRACE: Final = "0" * 32


def trace_id_of(carrier: dict[str, str]) -> str | None:
    """The trace id of a W3C ``traceparent``; None without a valid one."""
    match = _TRACEPARENT.match(carrier.get("traceparent", "").strip().lower())
    if match is None or match.group(1) == _NO_TRACE:
        return None
    return match.group(1)


def _entry_position(entry_id: str) -> tuple[int, int]:
    """``(milliseconds, sequence)`` of a Redis stream entry id ``"<ms>-<n>"``."""
    millis, _, counter = entry_id.partition("-")
    return int(millis), int(counter or 0)


def _compact(event: Envelope, cycle_id: str) -> tuple[str, dict[str, Any]] | None:
    """What the event is (the key's tail) and the fields a trace keeps of it; None for
    what a trace does not keep (stream deltas, payloads of no cycle)."""
    payload = event.payload
    match payload:
        case UserMessageReceived():
            message = payload.record(cycle_id, event.time)
            return f"user.message/{payload.message_id}", {"message": _record(message)}
        case ChatPosted():
            return f"chat.message/{payload.message.id}", {"message": _record(payload.message)}
        case ActionRequested():
            return f"action.requested/{payload.step}", {
                "step": payload.step,
                "action": payload.action,
            }
        case ActionCompleted():
            outcome = payload.outcome
            return f"action.completed/{payload.step}", {
                "step": payload.step,
                "action": payload.action,
                "status": outcome.status,
                "ends_cycle": outcome.ends_cycle,
                "summary": outcome.summary,
                "error": outcome.error,
                "worker": payload.worker,
            }
        case CycleEnded():
            return "cycle.ended", {"actions": list(payload.actions), "reason": payload.reason}
    return None  # chat.delta: the complete message follows; requests and replies: not events


def _record(message: ChatRecord) -> dict[str, Any]:
    return message.model_dump(mode="json", by_alias=True)


def _event(document: Document) -> CycleEvent:
    return CycleEvent.model_validate(
        {
            "event_id": document["event_id"],
            "at": document["at"],
            "stream": document["stream"],
            "type": document["type"],
            "trace_id": document.get("trace_id"),
            **document["data"],
        }
    )


class CycleLog:
    def __init__(self, store: DocumentStore) -> None:
        self._events: Collection = store.collection(COLLECTION)

    async def setup(self) -> None:
        await self._events.ensure_index(
            [("user_id", 1), ("cycle_id", 1), ("ms", 1), ("at", 1), ("seq", 1)]
        )
        await self._events.ensure_index([("at", 1)])  # for the retention purge

    # -- writes -----------------------------------------------------------------------------

    async def record(self, event: Envelope, stream: str, entry_id: str) -> bool:
        """Keep ``event`` (read from ``stream`` at ``entry_id``) in its cycle's log. False
        when it is not part of a trace or was recorded before. Idempotent."""
        cycle_id = event.cycle_id
        if cycle_id is None and isinstance(event.payload, UserMessageReceived):
            cycle_id = cycle_id_for(event.payload.message_id)  # no cycle exists yet
        if cycle_id is None:
            return False
        compact = _compact(event, cycle_id)
        if compact is None:
            return False
        what, data = compact
        millis, seq = _entry_position(entry_id)
        key = f"{event.user_id}/{cycle_id}/{what}"
        document: Document = {
            "_id": key,
            "user_id": event.user_id,
            "cycle_id": cycle_id,
            "thread_id": event.thread_id,
            "event_id": event.event_id,
            "stream": stream.removeprefix(STREAM_PREFIX),
            "type": event.payload.type,
            "at": clock.stamp(event.time),
            "ms": millis,
            "seq": seq,
            "trace_id": trace_id_of(event.trace),
            "data": data,
        }
        try:
            await self._events.insert_one(document)
        except DuplicateKeyError:
            if isinstance(event.payload, ChatPosted):
                # Published again (a step re-run after a crash): its first place, its newest
                # words — what the thread's history shows too.
                await self._events.update_one({"_id": key}, set={"data": data})
            return False
        return True

    async def purge(self, older_than: datetime) -> int:
        """Delete the events made before ``older_than``; returns how many."""
        return await self._events.delete_many({"at": {"$lt": clock.stamp(older_than)}})

    # -- reads ------------------------------------------------------------------------------

    async def cycle(self, user_id: str, cycle_id: str) -> Cycle | None:
        """The user's cycle with its events in order; None when the user has no such cycle
        (another user's included)."""
        found = await self._events.find(
            {"user_id": user_id, "cycle_id": cycle_id},
            sort=[("ms", 1), ("at", 1), ("seq", 1), ("_id", 1)],
            limit=MAX_TRACE_EVENTS + 1,
        )
        if not found:
            return None
        truncated = len(found) > MAX_TRACE_EVENTS
        events = [_event(document) for document in found[:MAX_TRACE_EVENTS]]
        ended = next((e for e in events if e.type == "cycle.ended"), None)
        if ended is None and truncated:  # the end may lie beyond the page
            beyond = await self._events.find(
                {"user_id": user_id, "cycle_id": cycle_id, "type": "cycle.ended"}, limit=1
            )
            ended = _event(beyond[0]) if beyond else None
        requested = [e.action for e in events if e.type == "action.requested" and e.action]
        return Cycle(
            cycle_id=cycle_id,
            thread_id=found[0]["thread_id"],
            trace_id=next((e.trace_id for e in events if e.trace_id), None),
            started_at=events[0].at,
            ended_at=ended.at if ended else None,
            end_reason=ended.reason if ended else None,
            actions=ended.actions if ended and ended.actions is not None else requested,
            events=events,
            truncated=truncated,
        )


PURGE_INTERVAL_S: Final = 3600.0


async def purge_forever(log: CycleLog, retention_days: float) -> None:
    """Delete traces older than ``retention_days`` now and then every hour."""
    while True:
        try:
            removed = await log.purge(clock.now() - timedelta(days=retention_days))
            if removed:
                logger.info("deleted %d cycle events older than %g days", removed, retention_days)
        except Exception:  # storage may be briefly away; the next round tries again
            logger.exception("purging old cycle events failed")
        await asyncio.sleep(PURGE_INTERVAL_S)
