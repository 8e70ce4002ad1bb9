"""Reading one user's entries of a stream again, from a position on: the user's partition
(XRANGE, which holds all the user's entries in the order they were appended), each entry
opened and its signature checked as a reader would, and whether that position is still one
the stream can be read on from (nothing after it trimmed). The gateway replays chat.out with
it to a reconnecting socket."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from redis.exceptions import ResponseError

from memoria_contracts.events import Envelope
from memoria_contracts.streams import Stream
from memoria_runtime.bus.entries import DATA_FIELD, opened, read_entry
from memoria_runtime.bus.entry_id import EntryId
from memoria_runtime.bus.service_bus import MessageFormat
from memoria_runtime.bus.signing import Signer
from memoria_runtime.partitions import Partitions

log = logging.getLogger("memoria.bus.replay")

PAGE: Final = 500  # entries per XRANGE: every user's entries are read, this one's are kept


@dataclass
class ReplayScan:
    """How many entries (every user's) one replay may read, and what it read."""

    cap: int
    read: int = 0
    stopped: bool = False
    """The cap was reached before the end of the stream: later entries were not read."""


class Position(Enum):
    KEPT = "kept"
    """Every entry after it is still in the stream: the replay is complete."""
    TRIMMED = "trimmed"
    """Entries after it may have been trimmed away: the replay may have gaps."""
    UNKNOWN = "unknown"
    """Not a position of this stream (later than anything it ever held, or no stream)."""


class PartitionLog:
    """Reads a user's partition of ``stream`` the way its readers see it, from an entry on."""

    def __init__(
        self,
        redis: Any,
        message_format: type[MessageFormat],
        signer: Signer,
        partitions: Partitions,
        stream: Stream,
    ) -> None:
        self._redis = redis
        self._format = message_format
        self._signer = signer
        self._partitions = partitions
        self._stream = stream.value

    def _key(self, user_id: str) -> str:
        return self._partitions.of(user_id).scoped(self._stream)

    async def envelopes_after(
        self, user_id: str, after: EntryId, scan: ReplayScan
    ) -> AsyncGenerator[tuple[EntryId, Envelope], None]:
        """The user's envelopes of entries strictly after ``after``, in stream order, reading
        at most ``scan.cap`` entries (``scan.stopped`` tells whether it stopped there)."""
        cursor = str(after)
        key = self._key(user_id)
        while True:
            count = min(PAGE, scan.cap - scan.read)
            if count <= 0:
                scan.stopped = await self._any_after(key, cursor)
                return
            entries = await self._redis.xrange(key, min=f"({cursor}", max="+", count=count)
            scan.read += len(entries)
            for raw_id, fields in entries:
                entry_id = EntryId.parse(raw_id)
                event = self._envelope(raw_id, fields)
                if entry_id is not None and event is not None and event.user_id == user_id:
                    yield entry_id, event
            if len(entries) < count:
                return
            cursor = entries[-1][0].decode()

    async def _any_after(self, key: str, cursor: str) -> bool:
        return bool(await self._redis.xrange(key, min=f"({cursor}", max="+", count=1))

    async def position(self, user_id: str, entry_id: EntryId) -> Position:
        """Whether the user's partition still holds everything after ``entry_id``. Asked
        after the replay was read: if nothing after it had been trimmed by then, the reads
        saw all."""
        try:
            info = await self._redis.xinfo_stream(self._key(user_id))
        except ResponseError:  # no such stream: not one this reader saw
            return Position.UNKNOWN
        last = EntryId.parse(info["last-generated-id"])
        if last is None or entry_id > last:
            return Position.UNKNOWN  # e.g. the broker's data was lost since
        first = info.get("first-entry")
        oldest = EntryId.parse(first[0]) if first else None
        # Trimming takes the oldest entries: once the oldest left is at or before entry_id,
        # all that came after it is still there. An empty stream holds none of it unless
        # entry_id was the very last one.
        kept = entry_id >= oldest if oldest is not None else entry_id == last
        deleted = EntryId.parse(info.get("max-deleted-entry-id") or b"0-0")
        if deleted is not None and deleted > entry_id:
            kept = False  # an entry after it was deleted one by one (XDEL)
        return Position.KEPT if kept else Position.TRIMMED

    def _envelope(self, raw_id: bytes, fields: dict[bytes, bytes]) -> Envelope | None:
        if DATA_FIELD not in fields:
            return None
        event = opened(self._stream, read_entry(raw_id, fields, self._format), self._signer)
        if isinstance(event, str):
            log.error("skipping a %s entry: %s", self._stream, event)
            return None
        return event
