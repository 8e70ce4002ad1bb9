"""Streams hold what is in flight, not history: each is trimmed by age, never past an entry
that a consumer group reading it has not read or not acknowledged (ADR 32).

Every appended entry names no trim of its own beyond the ``MEMORIA_STREAM_MAXLEN`` backstop
(publisher.py). Instead, every service trims every stream of the contract now and then,
each partition of it on a partitioned bus (partitions.py):

* the **age cut** is ``now − MEMORIA_STREAM_RETENTION_SECONDS`` (an entry id starts with its
  time in milliseconds, so ``XTRIM MINID`` cuts by age), ``MEMORIA_DEAD_LETTER_RETENTION_DAYS``
  for the dead letters, which people read;
* the **floor** is, over the groups that read the stream (``memoria_contracts.streams.
  READERS``), the oldest entry still pending in one, or the first one a group has not read:
  nothing is trimmed at or after it, however old, so a consumer that is down or cut off
  finds its backlog when it is back.

The cut is approximate (``MINID ~``: whole nodes of the stream only), so trimming is cheap
and never goes further than asked. Which service trims does not matter: trimming twice is
trimming once. A group that pins entries much older than the retention (its consumers down,
or a group nobody reads any more) is logged, so an operator sees why the stream grows.

A gateway's inboxes of routed fan-out (routed.py) are read without a group: the gateway
trims its own by the same age, never past what it has not read yet (:func:`trim_inbox`).

What this bounds (docs/operating.md, "What Valkey holds"): at a steady rate of ``c`` cycles
a second, each stream holds about ``c × retention`` cycles' entries, over its partitions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from redis.exceptions import RedisError, ResponseError

from memoria_contracts.streams import READERS, Stream
from memoria_runtime.bus.entry_id import EntryId
from memoria_runtime.partitions import logical_name
from memoria_runtime.settings import BusSettings

log = logging.getLogger("memoria.bus.retention")

TRIMS_PER_RETENTION: Final = 10
MIN_TRIM_INTERVAL_S: Final = 5.0
MAX_TRIM_INTERVAL_S: Final = 60.0
PINNED_WARNING: Final = 3
"""A group holding entries this many retentions old is named in the log."""


@dataclass(frozen=True)
class GroupPosition:
    """Where one group stands on a stream."""

    name: str
    last_delivered: EntryId
    oldest_pending: EntryId | None

    @property
    def floor(self) -> EntryId:
        """The oldest entry the group may still need: its oldest pending one, else the
        first it has not read."""
        return self.oldest_pending or self.last_delivered.next()


def trim_point(age_cut: EntryId, positions: Iterable[GroupPosition]) -> EntryId:
    """Where to cut (``MINID``: entries before it go): the age cut, or earlier if a group
    still needs entries from before it."""
    return min([age_cut, *(p.floor for p in positions)])


def pinning(
    positions: Iterable[GroupPosition], oldest: EntryId, now_ms: int, retention_s: float
) -> list[GroupPosition]:
    """The groups that hold entries older than ``PINNED_WARNING`` retentions (``oldest`` is
    the stream's first entry: a group waiting for entries from before it holds nothing)."""
    oldest_allowed = now_ms - int(PINNED_WARNING * retention_s * 1000)
    return [p for p in positions if max(p.floor, oldest).millis < oldest_allowed]


async def group_positions(redis: Any, stream: str, groups: Iterable[str]) -> list[GroupPosition]:
    """The positions of ``groups`` on ``stream`` (groups missing from it are left out: a
    stream is created with all of them, topology.py)."""
    wanted = set(groups)
    found = [g for g in await redis.xinfo_groups(stream) if _text(g["name"]) in wanted]
    positions: list[GroupPosition] = []
    for group in found:
        name = _text(group["name"])
        oldest = None
        if int(group["pending"]):
            summary = await redis.xpending(stream, name)
            if summary["pending"] and summary["min"] is not None:
                oldest = EntryId.of(summary["min"])
        positions.append(GroupPosition(name, EntryId.of(group["last-delivered-id"]), oldest))
    return positions


def age_cut(retention_s: float, now_ms: int) -> EntryId:
    """The first entry id young enough to stay."""
    return EntryId(max(0, now_ms - int(retention_s * 1000)), 0)


async def trim_stream(redis: Any, stream: str, retention_s: float, now_ms: int) -> int:
    """Trim ``stream`` (a contract stream's key, in any partition) as the module says; how
    many entries went."""
    first: Any = await redis.xrange(stream, count=1)
    if not first:
        return 0  # no stream, or nothing in it
    oldest = EntryId.of(first[0][0])
    groups = [group.value for group in READERS.get(Stream(logical_name(stream)), ())]
    positions = await group_positions(redis, stream, groups)
    cut = age_cut(retention_s, now_ms)
    if oldest >= cut:
        return 0  # nothing old enough to go
    for held in pinning(positions, oldest, now_ms, retention_s):
        log.warning(
            "%s: group %s still needs entries from %.0f s ago (its consumers down?); "
            "the stream keeps them until it reads and acknowledges them",
            stream,
            held.name,
            (now_ms - max(held.floor, oldest).millis) / 1000,
        )
    removed: int = await redis.xtrim(
        stream, minid=str(trim_point(cut, positions)), approximate=True
    )
    return removed


def queue_inbox_trim(
    pipe: Any, inbox: str, retention_s: float, now_ms: int, read_up_to: EntryId
) -> None:
    """Queue the trim of a gateway's inbox on ``pipe``: entries older than the retention
    go, never one after ``read_up_to`` (the last the gateway read: the inbox is its own).
    A missing inbox stays missing (``XTRIM`` creates nothing)."""
    reader = GroupPosition("gateway", read_up_to, None)
    pipe.xtrim(
        inbox, minid=str(trim_point(age_cut(retention_s, now_ms), [reader])), approximate=True
    )


def retention_of(stream: Stream, settings: BusSettings) -> float:
    if stream is Stream.DEAD_LETTER:
        return settings.dead_letter_retention_days * 24 * 3600
    return settings.stream_retention_seconds


def stream_keys(stream: Stream, settings: BusSettings) -> list[str]:
    """The keys of ``stream``: one per partition; the dead letters are global."""
    if stream is Stream.DEAD_LETTER:
        return [stream.value]
    return settings.partitions.keys(stream.value)


def trim_interval(settings: BusSettings) -> float:
    every = settings.stream_retention_seconds / TRIMS_PER_RETENTION
    return min(MAX_TRIM_INTERVAL_S, max(MIN_TRIM_INTERVAL_S, every))


async def trim_all(
    redis: Any,
    settings: BusSettings,
    streams: Iterable[Stream] = Stream,
    now_ms: int | None = None,
) -> int:
    """One round over ``streams``, every partition of each; how many entries went. A stream
    that fails (the broker away) is skipped until the next round."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    removed = 0
    for stream in streams:
        retention_s = retention_of(stream, settings)
        for key in stream_keys(stream, settings):
            try:
                removed += await trim_stream(redis, key, retention_s, now_ms)
            except ResponseError as exc:
                log.error("%s: not trimmed: %s", key, exc)
            except RedisError as exc:
                log.info("%s: not trimmed this round (%s)", key, exc)
    return removed


async def keep_trimmed(redis: Any, settings: BusSettings) -> None:
    """Trim every stream now and then, until cancelled."""
    interval = trim_interval(settings)
    while True:
        removed = await trim_all(redis, settings)
        if removed:
            log.debug("trimmed %d entries", removed)
        await asyncio.sleep(interval)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
