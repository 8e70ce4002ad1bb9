"""Consumer groups with at-least-once delivery, read with plain redis-py.

For each (stream, group) a service reads, one :class:`GroupConsumer` runs three loops under
the service's consumer name, over every partition of the stream (partitions.py):

* the **reader** takes new entries (``XREADGROUP >``), no more than it has free handler
  slots, so a busy replica leaves the backlog in the stream for the next one. One blocking
  read waits on all the partitions at once; on a cluster, where one command may only name
  keys of one slot, there is one reader per partition (docs/adr/0029-partitioned-bus.md);
* the **reclaimer** takes entries that sat unacknowledged longer than ``reclaim_idle_ms``
  (``XAUTOCLAIM``) — left behind by a consumer that crashed or failed;
* the **keep-alive** re-claims the entries this process holds (``XCLAIM JUSTID``, which does
  not count as a delivery) so that a slow live handler (an LLM call) never has its entry
  taken while the reclaim window stays short.

An entry is acknowledged only after its handler returns (and after its reply, for a request,
is published). Nothing reaches a handler before the entry's signature holds (signing.py);
an entry that is unsigned, signed wrongly or not an envelope goes to the dead-letter stream
at once. A handler that raises leaves its entry pending for the reclaimer; an entry that
keeps failing is dead-lettered once it has failed ``max_deliveries`` times. A failure
caused by a broker outage is not held against the entry (docs/chaos.md, bug 6): the step
did nothing wrong, the broker was away. A delivery cut short by a crash counts, so an entry
that kills its consumer every time still ends in the dead-letter stream.

Why not FastStream's subscribers (ADR 0013): per entry they resolve the handler's arguments
with FastDepends and run a stack of middlewares (telemetry, Prometheus, logging,
acknowledgement), which was most of a cycle's CPU on two cores; and a FastStream stream
subscriber with ``min_idle_time`` only ever reclaims, so each group needed two subscribers
polling Redis. What remains of FastStream is its entry format (``MESSAGE_FORMAT``,
service_bus.py), so a FastStream client still reads and writes these streams; each reader
declares its stream and group on the service's bus, for its AsyncAPI document (asyncapi.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind
from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memoria_contracts.events import Envelope
from memoria_contracts.streams import Group, Stream
from memoria_runtime import metrics
from memoria_runtime.bus.channels import Channel
from memoria_runtime.bus.deadletter import dead_letter
from memoria_runtime.bus.entries import Entry, opened, read_entry
from memoria_runtime.bus.service_bus import ServiceBus
from memoria_runtime.bus.signing import reply_channel, signer_for
from memoria_runtime.bus.topology import create_stream
from memoria_runtime.health import STOP_WAIT_S, stop_task, waiting_at
from memoria_runtime.settings import BusSettings

log = logging.getLogger("memoria.bus")

_KEEPALIVES_PER_IDLE = 3  # re-claim held entries three times per reclaim window
_RECLAIMS_PER_IDLE = 4  # look for abandoned entries four times per reclaim window
_MAX_RECLAIM_INTERVAL_S = 2.0
_READ_BLOCK_MS = 2_000  # how long one XREADGROUP waits for news (and a stop waits for it)
_RETRY_AFTER_S = (0.05, 0.1, 0.2, 0.5, 1.0)  # after a failed read: the broker is away
_CRASH_ALLOWANCE = 4  # deliveries per strike allowed when outages and crashes mix
_OUTAGES_KEY = "memoria:bus:outages:{stream}:{group}"
_OUTAGES_TTL_S = 7 * 24 * 3600
_CLAIM_CHUNK = 100
DEFAULT_SLOTS = 16
"""Handlers one group consumer runs at once, unless the service or
``MEMORIA_CONSUMER_CONCURRENCY`` says otherwise."""


@dataclass(frozen=True)
class Delivery:
    """Facts about the stream entry behind an event, for idempotency and re-dispatch."""

    stream: str
    group: str
    entry_id: str
    data: bytes
    redelivered: bool


EventHandler = Callable[[Envelope, Delivery], Awaitable[Envelope | None]]
"""Handles one event; a returned envelope is the reply to a request (request/reply)."""


_OUTAGES = (
    RedisConnectionError,  # a cluster's slot without a primary for now too (redis_clients)
    RedisTimeoutError,
    BusyLoadingError,
    ClusterDownError,  # a cluster failing over
    TryAgainError,  # a cluster moving the slot
)


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the broker could not be reached, rather
    than that handling the entry went wrong."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, _OUTAGES):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


@dataclass(frozen=True)
class Verdict:
    """Whether a reclaimed entry may run again, from its delivery history."""

    deliveries: int
    outages: int
    max_deliveries: int

    @property
    def strikes(self) -> int:
        """Deliveries that failed for reasons of the entry's own (or crashed)."""
        return max(0, self.deliveries - 1 - self.outages)

    @property
    def refusal(self) -> str | None:
        if self.strikes >= self.max_deliveries:
            return f"failed {self.strikes} times"
        if self.deliveries > self.max_deliveries * _CRASH_ALLOWANCE:
            return (
                f"delivered {self.deliveries - 1} times without success "
                f"({self.outages} of them cut short by broker outages)"
            )
        return None


class GroupConsumer:
    """Reads one stream for one consumer group and runs ``handler`` on each entry."""

    def __init__(
        self,
        broker: ServiceBus,
        settings: BusSettings,
        *,
        stream: Stream,
        group: Group,
        handler: EventHandler,
        description: str,
        slots: int = DEFAULT_SLOTS,
    ) -> None:
        """``slots``: this service's default for how many handlers run at once;
        ``settings.consumer_concurrency`` overrides it when set."""
        self.stream = stream
        self.group = group
        self.description = description
        self._broker = broker
        self._handler = handler
        self._signer = signer_for(settings)
        self._tracer = broker.tracer
        self._consumer = settings.consumer
        self._idle_ms = settings.reclaim_idle_ms
        self._max_deliveries = settings.max_deliveries
        self._maxlen = settings.stream_maxlen
        self._grace_s = settings.shutdown_grace_seconds
        self._slots = max(1, settings.consumer_concurrency or slots)
        self._partitions = {part.scoped(stream.value): part for part in settings.partitions.all}
        self._keys = tuple(self._partitions)
        # A read may only name keys of one slot on a cluster: one reader per partition there.
        self._reads = (
            tuple((key,) for key in self._keys) if settings.redis_cluster else (self._keys,)
        )
        self._metrics = metrics.group_consumer_metrics(broker.service, stream.value, group.value)
        self._metrics.slots.set(self._slots)
        # (partition key, entry id) read and not yet acknowledged or given up
        self._held: set[tuple[str, str]] = set()
        self._running: set[asyncio.Task[None]] = set()
        self._slot_freed = asyncio.Event()
        self._loops: list[asyncio.Task[None]] = []

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        for key in self._keys:
            await create_stream(self._broker.redis, key, self.group)
        self._loops = [
            asyncio.create_task(self._read_forever(keys), name=f"read {self._name}")
            for keys in self._reads
        ]
        self._loops.append(
            asyncio.create_task(self._reclaim_forever(), name=f"reclaim {self._name}")
        )
        self._loops.append(
            asyncio.create_task(self._keep_alive_forever(), name=f"keepalive {self._name}")
        )

    async def stop(self) -> None:
        """Stop taking entries, let running handlers finish within the grace period, then
        cancel them (their entries stay pending for another consumer)."""
        reading, keep_alive = self._loops[:-1], self._loops[-1:]
        for task in reading:
            await stop_task(task)
        if self._running:
            _, late = await asyncio.wait(set(self._running), timeout=self._grace_s)
            for task in late:
                task.cancel()
            if late:
                # Bounded as stop_task is: a handler that swallows its cancellation is left
                # behind (named in the log), not waited for until the orchestrator kills us.
                _, stuck = await asyncio.wait(late, timeout=STOP_WAIT_S)
                log.warning("%s: %d handlers cut short by the stop", self._name, len(late))
                for task in stuck:
                    log.warning(
                        "%s: a handler did not stop when cancelled; left behind, waiting at %s",
                        self._name,
                        waiting_at(task),
                    )
        for task in keep_alive:
            await stop_task(task)
        self._loops = []

    @property
    def _name(self) -> str:
        return f"{self.stream.value}:{self.group.value}"

    # -- the three loops -------------------------------------------------------------------

    async def _read_forever(self, keys: tuple[str, ...]) -> None:
        failures = 0
        streams: dict[Any, Any] = dict.fromkeys(keys, ">")
        while True:
            free = await self._free_slots()
            try:
                reply: Any = await self._broker.redis.xreadgroup(
                    self.group.value,
                    self._consumer,
                    streams,
                    # No more than it can work on, the rest being for other replicas: COUNT
                    # holds for each partition read, so the free slots are shared out.
                    count=max(1, free // len(self._keys)),
                    block=_READ_BLOCK_MS,
                )
            except RedisError as exc:
                if isinstance(exc, ResponseError) and "NOGROUP" in str(exc):
                    await self._start_group_again(keys)
                else:  # the broker is away or refuses for now: never stop reading
                    failures = await self._pause_after(exc, failures)
                continue
            except Exception as exc:  # a partition left unread is worse than any log line
                log.exception("%s: read of %s failed", self._name, ", ".join(keys))
                failures = await self._pause_after(exc, failures)
                continue
            failures = 0
            for key, entries in _by_stream(reply):
                await self._take(key, entries, redelivered=False)

    async def _reclaim_forever(self) -> None:
        interval = min(self._idle_ms / 1000 / _RECLAIMS_PER_IDLE, _MAX_RECLAIM_INTERVAL_S)
        while True:
            await asyncio.sleep(interval)
            for key in self._keys:
                await self._reclaim_safely(key)

    async def _reclaim_safely(self, key: str) -> None:
        """One partition's failure does not keep the others from being reclaimed."""
        try:
            await self._reclaim_once(key)
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                log.exception("%s: reclaim failed", self._name)
        except RedisError as exc:
            log.warning("%s: reclaim failed (%s); trying again", self._name, exc)
        except Exception:  # keep reclaiming: one bad entry must not stop the loop
            log.exception("%s: reclaim failed", self._name)

    async def _keep_alive_forever(self) -> None:
        interval = self._idle_ms / 1000 / _KEEPALIVES_PER_IDLE
        while True:
            await asyncio.sleep(interval)
            held: dict[str, list[Any]] = {}
            for key, entry_id in list(self._held):
                held.setdefault(key, []).append(entry_id)
            for key, ids in held.items():
                for start in range(0, len(ids), _CLAIM_CHUNK):
                    try:
                        await self._broker.redis.xclaim(
                            key,
                            self.group.value,
                            self._consumer,
                            min_idle_time=0,
                            message_ids=ids[start : start + _CLAIM_CHUNK],
                            justid=True,
                        )
                    except Exception as exc:  # the next round claims them again
                        log.warning("%s: keep-alive claim failed: %s", self._name, exc)

    # -- taking entries --------------------------------------------------------------------

    async def _free_slots(self) -> int:
        while len(self._running) >= self._slots:
            self._slot_freed.clear()
            await self._slot_freed.wait()
        return self._slots - len(self._running)

    async def _take(
        self,
        key: str,
        entries: Iterable[tuple[bytes, dict[bytes, bytes] | None]],
        *,
        redelivered: bool,
    ) -> None:
        for raw_id, fields in entries:
            entry_id = raw_id.decode()
            if (key, entry_id) in self._held:  # already in this process' hands (a reclaim race)
                continue
            self._held.add((key, entry_id))
            await self._free_slots()
            task = asyncio.create_task(self._settle(key, entry_id, fields, redelivered=redelivered))
            self._running.add(task)
            self._metrics.running.set(len(self._running))
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._metrics.running.set(len(self._running))
        self._slot_freed.set()

    async def _reclaim_once(self, key: str) -> None:
        start = "0-0"
        while True:
            next_start, claimed, *_ = await self._broker.redis.xautoclaim(
                key,
                self.group.value,
                self._consumer,
                min_idle_time=self._idle_ms,
                start_id=start,
                count=self._slots,
            )
            fresh = [(i, f) for i, f in claimed if (key, i.decode()) not in self._held]
            if fresh:
                await self._take(key, fresh, redelivered=True)
            start = next_start.decode() if isinstance(next_start, bytes) else str(next_start)
            if start == "0-0":
                return

    async def _pause_after(self, exc: Exception, failures: int) -> int:
        delay = _RETRY_AFTER_S[min(failures, len(_RETRY_AFTER_S) - 1)]
        if failures == 0:
            log.warning("%s: read failed (%s); retrying", self._name, exc)
        await asyncio.sleep(delay)
        return failures + 1

    async def _start_group_again(self, keys: tuple[str, ...]) -> None:
        """The stream or its group vanished (a flushed broker, a broker restarted without
        persistence): create it again, as at start."""
        log.warning("%s: consumer group missing; creating it again", self._name)
        try:
            for key in keys:
                await create_stream(self._broker.redis, key, self.group)
        except RedisError:
            await asyncio.sleep(_RETRY_AFTER_S[-1])

    # -- one entry -------------------------------------------------------------------------

    async def _settle(
        self, key: str, entry_id: str, fields: dict[bytes, bytes] | None, *, redelivered: bool
    ) -> None:
        """Handle one entry and acknowledge it, or leave it pending, or dead-letter it."""
        try:
            if fields is None:  # trimmed away while pending: nothing left to handle
                await self._ack(key, entry_id)
                return
            entry = read_entry(entry_id, fields, self._broker.message_format)
            await self._settle_entry(key, entry, redelivered=redelivered)
        except Exception:
            log.exception("%s: entry %s of %s left pending", self._name, entry_id, key)
        finally:
            self._held.discard((key, entry_id))

    async def _settle_entry(self, key: str, entry: Entry, *, redelivered: bool) -> None:
        # Signed for the stream, whichever partition it is in (bus/framing.py).
        event = opened(self.stream.value, entry, self._signer)
        if isinstance(event, str):
            await self._refuse(key, entry, event)
            return
        if redelivered:
            refusal = await self._refusal(key, entry.entry_id)
            if refusal is not None:
                await self._refuse(key, entry, refusal)
                return
            log.warning("reclaimed %s %s", self.stream.value, event.event_id)
        delivery = Delivery(
            stream=self.stream.value,
            group=self.group.value,
            entry_id=entry.entry_id,
            data=entry.data,
            redelivered=redelivered,
        )
        started = time.perf_counter()
        with self._tracer.start_as_current_span(
            f"{self.stream.value} process",
            context=propagate.extract(entry.headers),
            kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": "redis",
                "messaging.destination.name": self.stream.value,
                "messaging.destination.partition.id": key,
                "messaging.consumer.group.name": self.group.value,
                "messaging.message.id": entry.entry_id,
                "messaging.message.conversation_id": entry.correlation_id,
            },
        ) as span:
            try:
                reply = await self._handler(event, delivery)
            except Exception as exc:
                span.record_exception(exc)
                span.set_status(trace.StatusCode.ERROR)
                self._metrics.failed.inc()
                await self._note_failure(key, entry, exc)
                return
            finally:
                self._metrics.handling_seconds.observe(time.perf_counter() - started)
            framed = await self._framed_reply(event, entry, reply)
            await self._ack(key, entry.entry_id, reply_to=entry.reply_to, reply=framed)
        self._metrics.handled.inc()
        if redelivered:
            await self._forget_outages(key, entry.entry_id)

    async def _framed_reply(
        self, event: Envelope, entry: Entry, reply: Envelope | None
    ) -> bytes | None:
        if reply is None or not entry.reply_to:
            return None
        body = reply.model_dump_json().encode()
        return await self._broker.message_format.encode(
            message=body,
            reply_to=None,
            headers=self._signer.headers(reply_channel(event.event_id), body),
            correlation_id=entry.correlation_id,
        )

    async def _ack(
        self, key: str, entry_id: str, *, reply_to: str = "", reply: bytes | None = None
    ) -> None:
        """Acknowledge, after publishing the reply to a request (one round trip for both)."""
        if reply is None:
            await self._broker.redis.xack(key, self.group.value, entry_id)
            return
        async with self._broker.redis.pipeline(transaction=False) as pipe:
            self._broker.queue_reply(pipe, reply_to, reply)
            pipe.xack(key, self.group.value, entry_id)
            await pipe.execute()

    async def _refuse(self, key: str, entry: Entry, reason: str) -> None:
        log.error("dead-lettered %s %s: %s", key, entry.entry_id, reason)
        await dead_letter(
            self._broker.redis,
            stream=key,
            group=self.group.value,
            entry_id=entry.entry_id,
            data=entry.data,
            reason=reason,
            maxlen=self._maxlen,
        )
        await self._broker.redis.xack(key, self.group.value, entry.entry_id)
        self._metrics.dead_lettered.inc()
        await self._forget_outages(key, entry.entry_id)

    # -- delivery history ------------------------------------------------------------------

    def _outages_key(self, key: str) -> str:
        """In the partition of the stream's key (with its hash tag)."""
        name = _OUTAGES_KEY.format(stream=self.stream.value, group=self.group.value)
        return self._partitions[key].scoped(name)

    async def _refusal(self, key: str, entry_id: str) -> str | None:
        """Why a reclaimed entry must not run again, or None."""
        async with self._broker.redis.pipeline(transaction=False) as pipe:
            pipe.xpending_range(key, self.group.value, min=entry_id, max=entry_id, count=1)
            pipe.hget(self._outages_key(key), entry_id)
            pending, outages = await pipe.execute()
        deliveries = int(pending[0]["times_delivered"]) if pending else 1
        return Verdict(
            deliveries=deliveries,
            outages=int(outages or 0),
            max_deliveries=self._max_deliveries,
        ).refusal

    async def _note_failure(self, key: str, entry: Entry, exc: Exception) -> None:
        if not is_outage(exc):
            log.error(
                "%s: handler failed on %s; it stays pending for a retry",
                self._name,
                entry.entry_id,
                exc_info=exc,
            )
            return
        log.warning("%s: broker outage while handling %s: %s", self._name, entry.entry_id, exc)
        try:
            async with self._broker.redis.pipeline(transaction=False) as pipe:
                pipe.hincrby(self._outages_key(key), entry.entry_id, 1)
                pipe.expire(self._outages_key(key), _OUTAGES_TTL_S)
                await pipe.execute()
        except RedisError:
            # Still away: this delivery counts as a strike. Bounded by max_deliveries.
            log.warning("%s: could not record the outage of %s", self._name, entry.entry_id)

    async def _forget_outages(self, key: str, entry_id: str) -> None:
        with contextlib.suppress(RedisError):
            await self._broker.redis.hdel(self._outages_key(key), entry_id)


def _by_stream(reply: Any) -> list[tuple[str, Any]]:
    """An XREADGROUP reply as (stream key, entries): a list of pairs, or with RESP3 a map."""
    pairs = reply.items() if isinstance(reply, dict) else reply or ()
    return [(k.decode() if isinstance(k, bytes) else k, entries) for k, entries in pairs]


def subscribe_group(
    broker: ServiceBus,
    settings: BusSettings,
    *,
    stream: Stream,
    group: Group,
    handler: EventHandler,
    description: str,
    slots: int = DEFAULT_SLOTS,
) -> GroupConsumer:
    """Read ``stream`` in ``group`` while ``broker`` runs (started and stopped with it),
    running up to ``slots`` handlers at once (``MEMORIA_CONSUMER_CONCURRENCY`` overrides)."""
    consumer = GroupConsumer(
        broker,
        settings,
        stream=stream,
        group=group,
        handler=handler,
        description=description,
        slots=slots,
    )
    broker.add_reader(consumer, Channel(stream.value, group.value, "xreadgroup", description))
    return consumer
