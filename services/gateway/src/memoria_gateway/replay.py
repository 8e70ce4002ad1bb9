"""Replaying chat.out to a reconnecting socket: the user's frames after a given entry (read
by the bus' ``PartitionLog``), and whether that entry is still a position the stream can
resume from."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator
from typing import Any, Final

from redis.exceptions import RedisError

from memoria_contracts.frames import ResumedFrame
from memoria_contracts.streams import Stream
from memoria_gateway.frames import OutboundFrame, frame_for
from memoria_gateway.hub import Connection
from memoria_runtime.bus.entry_id import EntryId
from memoria_runtime.bus.replay import PartitionLog, Position, ReplayScan
from memoria_runtime.bus.service_bus import MessageFormat
from memoria_runtime.bus.signing import Signer
from memoria_runtime.partitions import Partitions

log = logging.getLogger("memoria.gateway.replay")

REPLAY_CAP: Final = 5000
"""Most frames one resume replays; past it, ``complete`` is false and the client reloads."""
SCAN_CAP: Final = 10_000
"""Most chat.out entries (every user's) one resume reads. chat.out holds every user's frames
(up to ``MEMORIA_STREAM_MAXLEN``, 100,000 by default), so a resume from an old position
would read and check all of them — seconds of the gateway's CPU for a full stream, a tenth
of that for the cap (``bench/replay_scan.py``, docs/benchmarks.md) — for every reconnect, by
anyone holding a token. Past the cap the replay stops, ``complete`` is false and the client
reloads. A cycle writes 7 to 15 entries, so 10,000 cover a client away for 7 to 14 seconds
at a hundred cycles a second, minutes at ten, and hours on a quiet install."""


class ChatOutLog(PartitionLog):
    """Reads a user's partition of ``memoria:chat.out`` the way the fan-out sees it, from an
    entry on, as frames."""

    def __init__(
        self,
        redis: Any,
        message_format: type[MessageFormat],
        signer: Signer,
        partitions: Partitions,
    ) -> None:
        super().__init__(redis, message_format, signer, partitions, Stream.CHAT_OUT)

    async def frames_after(
        self, user_id: str, after: EntryId, scan: ReplayScan
    ) -> AsyncGenerator[tuple[EntryId, OutboundFrame], None]:
        """The user's frames of entries strictly after ``after``, in stream order, each with
        its entry id as ``event_id``, reading at most ``scan.cap`` entries (``scan.stopped``
        tells whether it stopped there)."""
        async with contextlib.aclosing(self.envelopes_after(user_id, after, scan)) as events:
            async for entry_id, event in events:
                frame = frame_for(event, str(entry_id))
                if frame is not None:
                    yield entry_id, frame


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
