"""Replaying chat.out to a reconnecting socket: the user's frames after a given entry
(XRANGE of the user's partition of chat.out, which holds all the user's frames in the order
they were sent), and whether that entry is still a position the stream can resume from."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from redis.exceptions import RedisError, ResponseError

from memoria_contracts.events import Envelope
from memoria_contracts.frames import ResumedFrame
from memoria_contracts.streams import Stream
from memoria_gateway.frames import OutboundFrame, frame_for
from memoria_gateway.hub import Connection
from memoria_gateway.resume import EntryId
from memoria_runtime.bus.entries import DATA_FIELD, opened, read_entry
from memoria_runtime.bus.service_bus import MessageFormat
from memoria_runtime.bus.signing import Signer
from memoria_runtime.partitions import Partitions

log = logging.getLogger("memoria.gateway.replay")

REPLAY_CAP: Final = 5000
"""Most frames one resume replays; past it, ``complete`` is false and the client reloads."""
PAGE: Final = 500  # entries per XRANGE: every user's entries are read, this one's are kept
SCAN_CAP: Final = 10_000
"""Most chat.out entries (every user's) one resume reads. chat.out holds every user's frames
(up to ``MEMORIA_STREAM_MAXLEN``, 100,000 by default), so a resume from an old position
would read and check all of them — seconds of the gateway's CPU for a full stream, a tenth
of that for the cap (``bench/replay_scan.py``, docs/benchmarks.md) — for every reconnect, by
anyone holding a token. Past the cap the replay stops, ``complete`` is false and the client
reloads. A cycle writes 7 to 15 entries, so 10,000 cover a client away for 7 to 14 seconds
at a hundred cycles a second, minutes at ten, and hours on a quiet install."""


@dataclass
class ReplayScan:
    """How much of chat.out one resume may read, and what it read."""

    cap: int = SCAN_CAP
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


class ChatOutLog:
    """Reads a user's partition of ``memoria:chat.out`` the way the fan-out sees it, from an
    entry on."""

    def __init__(
        self,
        redis: Any,
        message_format: type[MessageFormat],
        signer: Signer,
        partitions: Partitions,
    ) -> None:
        self._redis = redis
        self._format = message_format
        self._signer = signer
        self._partitions = partitions
        self._stream = Stream.CHAT_OUT.value

    def _key(self, user_id: str) -> str:
        return self._partitions.of(user_id).scoped(self._stream)

    async def frames_after(
        self, user_id: str, after: EntryId, scan: ReplayScan
    ) -> AsyncGenerator[tuple[EntryId, OutboundFrame], None]:
        """The user's frames of entries strictly after ``after``, in stream order, each with
        its entry id as ``event_id``, reading at most ``scan.cap`` entries (``scan.stopped``
        tells whether it stopped there)."""
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
                if entry_id is None or event is None or event.user_id != user_id:
                    continue
                frame = frame_for(event, str(entry_id))
                if frame is not None:
                    yield entry_id, frame
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
        except ResponseError:  # no such stream: not one this socket saw
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
            log.error("skipping a chat.out entry: %s", event)
            return None
        return event


async def resume(
    connection: Connection,
    chat_out: ChatOutLog,
    since: str,
    *,
    cap: int = REPLAY_CAP,
    scan_cap: int = SCAN_CAP,
) -> ResumedFrame:
    """Send the user's frames after ``since``, then the ``resumed`` frame, then the live
    frames held meanwhile. The connection was told to hold live frames before it was
    registered for them, so every frame goes out once: replayed or live. ``cap`` bounds the
    frames sent, ``scan_cap`` the entries read (every user's)."""
    start = EntryId.parse(since)
    scan = ReplayScan(cap=scan_cap)
    replayed = 0
    last: EntryId | None = None
    complete = False
    position = Position.UNKNOWN
    if start is not None:
        capped = False
        try:
            async with contextlib.aclosing(
                chat_out.frames_after(connection.user_id, start, scan)
            ) as frames:
                async for entry_id, frame in frames:
                    if replayed == cap:
                        capped = True  # the client reloads its threads instead
                        break
                    await connection.send_in_turn(frame.model_dump_json())
                    replayed, last = replayed + 1, entry_id
            position = await chat_out.position(connection.user_id, start)
        except (RedisError, OSError) as exc:
            log.error("could not replay chat.out to %s: %s", connection.user_id, exc)
        complete = position is Position.KEPT and not capped and not scan.stopped
    resumed = ResumedFrame(since=since, replayed=replayed, complete=complete)
    await connection.send_in_turn(resumed.model_dump_json())
    # Live frames up to the last replayed entry were replayed (or, for a known position,
    # seen by the client before it left). From an unknown position every live frame is new.
    watermark = last or (start if position is not Position.UNKNOWN else None)
    await connection.release_live(watermark)
    return resumed
