"""The chat.out fan-out: how a gateway replica gets the frames it delivers to its sockets, one
entry at a time, in stream order, without a consumer group.

* **broadcast** (one server): the replica reads all of chat.out, every partition of it, and
  keeps what belongs to its sockets.
* **routed** (a partitioned bus, a cluster): the replica reads only its own inboxes, one per
  partition, to which each chat.out append copies the frames of the users it holds
  (memoria_runtime.bus.routed, routing.py). An inbox expires unless the replica keeps it
  alive, so the routes of a replica that died are gone within a lease; the replica trims its
  inboxes by age as the streams are (``MEMORIA_STREAM_RETENTION_SECONDS``), never past what
  it has not read.

A user's frames are all in one partition, so each user's frames arrive in the order they were
sent, as their chat.out entry ids (the frames' ``event_id``) say. One blocking read waits on
every partition; on a cluster (one slot per command) there is one read per partition.

A plain ``XREAD`` loop on the bus' client rather than a FastStream subscriber: chat.out
carries every streamed token of every cycle, and FastStream's per-entry machinery cost more
than the delivery itself (ADR 0013).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from memoria_contracts.streams import Stream
from memoria_gateway.frames import frame_for
from memoria_gateway.hub import ConnectionHub
from memoria_gateway.routing import UserRoutes
from memoria_runtime import keys, metrics
from memoria_runtime.bus import ServiceBus
from memoria_runtime.bus.channels import Channel
from memoria_runtime.bus.entries import opened, read_entry
from memoria_runtime.bus.entry_id import EntryId
from memoria_runtime.bus.retention import queue_inbox_trim
from memoria_runtime.bus.routed import ENTRY_FIELD, INBOX_LEASE_S, ROUTE_TTL_S
from memoria_runtime.bus.signing import Signer
from memoria_runtime.health import stop_task
from memoria_runtime.partitions import Partition

log = logging.getLogger("memoria.gateway.fan_out")

_BATCH = 100
_BLOCK_MS = 2_000
_RETRY_AFTER_S = (0.05, 0.1, 0.2, 0.5, 1.0)
_LEASES_PER_TTL = 3  # an inbox's lease is renewed three times per lease
_ROUTE_RENEWALS_PER_TTL = 24  # route sets are registered again every hour
FAN_OUT = "fan-out"
"""The ``group`` label of the fan-out's metrics (it reads without a consumer group)."""
INBOX_LOST_WHY = "this server lost its frame inbox"


class ChatOutFanOut:
    def __init__(
        self,
        broker: ServiceBus,
        signer: Signer,
        hub: ConnectionHub,
        routes: UserRoutes,
        *,
        cluster: bool,
        retention_s: float,
    ) -> None:
        """``retention_s``: how long a copy stays in an inbox once read."""
        self._broker = broker
        self._retention_s = retention_s
        self._signer = signer
        self._hub = hub
        self._routes = routes
        self._parts = {
            self._source(part): part for part in broker.partitions.all
        }  # the key read → its partition
        keys_read = list(self._parts)
        self._reads = [[key] for key in keys_read] if cluster else [keys_read]
        self._metrics = metrics.group_consumer_metrics(
            broker.service, Stream.CHAT_OUT.value, FAN_OUT
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._read_up_to: dict[str, str] = {}  # each source's last entry read
        broker.add_reader(self, self._channel())

    @property
    def routed(self) -> bool:
        return self._routes.routed

    def _source(self, part: Partition) -> str:
        if self.routed:
            return keys.gateway_inbox(part, self._routes.gateway)
        return part.scoped(Stream.CHAT_OUT.value)

    def _channel(self) -> Channel:
        description = "Deliver messages, deltas and cycle ends to the user's sockets."
        if self.routed:
            return Channel("memoria:gateway:{gateway}:inbox", "gateway-inbox", "xread", description)
        return Channel(Stream.CHAT_OUT.value, "gateway-fanout", "xread", description)

    async def start(self) -> None:
        """Read each source from its current last entry. Reading from "$" would ask, at
        each XREAD, for entries newer than the moment it is sent, and one appended between
        two reads would never reach a socket — which a resumed socket, registered before its
        replay was read, must be able to count on."""
        last_ids: dict[str, str] = {}
        for key in self._parts:
            last_ids[key] = await (self._open_inbox(key) if self.routed else self._newest(key))
        self._read_up_to = dict(last_ids)
        self._tasks = [
            asyncio.create_task(
                self._read_forever({key: last_ids[key] for key in keys}), name="chat.out fan-out"
            )
            for keys in self._reads
        ]
        if self.routed:
            self._tasks.append(asyncio.create_task(self._keep_leases(), name="inbox leases"))

    async def stop(self) -> None:
        for task in self._tasks:
            await stop_task(task)
        self._tasks = []
        if self.routed:
            await self._routes.close()
            # Copies stop at once (they find no inbox and drop this gateway from the routes).
            with contextlib.suppress(Exception):
                async with self._broker.redis.pipeline(transaction=False) as pipe:
                    for key in self._parts:
                        pipe.delete(key)
                    await pipe.execute()

    # -- sources ---------------------------------------------------------------------------

    async def _newest(self, key: str) -> str:
        newest: Any = await self._broker.redis.xrevrange(key, count=1)
        return str(newest[0][0].decode()) if newest else "0-0"

    async def _open_inbox(self, key: str) -> str:
        """Create the inbox (empty: an entry trimmed away at once), under its lease; the id
        to read after."""
        async with self._broker.redis.pipeline(transaction=False) as pipe:
            pipe.xadd(key, {b"opened": b"1"}, maxlen=0, approximate=False)
            pipe.expire(key, INBOX_LEASE_S)
            opened_id, _ = await pipe.execute()
        return str(opened_id.decode() if isinstance(opened_id, bytes) else opened_id)

    async def _keep_leases(self) -> None:
        """Keep the inboxes (:meth:`renew_inboxes`), and every hour the users' routes."""
        renewed_routes = time.monotonic()
        while True:
            await asyncio.sleep(INBOX_LEASE_S / _LEASES_PER_TTL)
            try:
                await self.renew_inboxes(int(time.time() * 1000))
                if time.monotonic() - renewed_routes > ROUTE_TTL_S / _ROUTE_RENEWALS_PER_TTL:
                    await self._routes.renew()
                    renewed_routes = time.monotonic()
            except Exception as exc:  # the broker away: the next round tries again
                log.warning("could not renew the inbox leases: %r", exc)

    async def renew_inboxes(self, now_ms: int) -> None:
        """Renew every inbox's lease and trim it by age up to what was read, in one round
        trip. An inbox found gone (this gateway was away longer than a lease, the broker lost
        it) is opened again; frames copied in between were not: its users' sockets are
        closed, to resume (``?since=``) with what they missed."""
        async with self._broker.redis.pipeline(transaction=False) as pipe:
            for key in self._parts:
                pipe.expire(key, INBOX_LEASE_S)
            for key in self._parts:
                read = EntryId.of(self._read_up_to.get(key, "0-0"))
                queue_inbox_trim(pipe, key, self._retention_s, now_ms, read)
            alive = (await pipe.execute())[: len(self._parts)]
        for key, kept in zip(self._parts, alive, strict=True):
            if not kept:
                await self._inbox_lost(key)

    async def _inbox_lost(self, key: str) -> None:
        part = self._parts[key]
        log.warning("inbox %s was gone; opened again, its users' sockets closed", key)
        await self._open_inbox(key)
        users = [u for u in self._routes.users if self._broker.partitions.of(u) == part]
        await self._routes.forget(users)
        for user in users:
            self._hub.drop(user, INBOX_LOST_WHY)

    # -- reading ---------------------------------------------------------------------------

    async def _read_forever(self, last_ids: dict[Any, Any]) -> None:
        failures = 0
        while True:
            try:
                reply: Any = await self._broker.redis.xread(
                    dict(last_ids), count=_BATCH, block=_BLOCK_MS
                )
            except Exception as exc:  # the broker away, a cluster failing over: read again
                if failures == 0:
                    log.warning("chat.out read failed (%r); retrying", exc)
                await asyncio.sleep(_RETRY_AFTER_S[min(failures, len(_RETRY_AFTER_S) - 1)])
                failures += 1
                continue
            failures = 0
            for raw_key, entries in reply.items() if isinstance(reply, dict) else reply or ():
                key = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
                for raw_id, fields in entries:
                    last_ids[key] = self._read_up_to[key] = raw_id.decode()
                    try:
                        self._deliver(raw_id, fields)
                    except Exception:  # one bad entry must not stop every user's stream
                        self._metrics.failed.inc()
                        log.exception("chat.out entry %s of %s not delivered", raw_id, key)

    def _deliver(self, raw_id: bytes, fields: dict[bytes, bytes]) -> None:
        # A copy in an inbox names the chat.out entry it copies; that id is the frame's.
        source_id = fields.get(ENTRY_FIELD, raw_id) if self.routed else raw_id
        if self.routed and ENTRY_FIELD not in fields:
            return  # the inbox's opening entry, or something no publisher wrote
        entry = read_entry(source_id, fields, self._broker.message_format)
        event = opened(Stream.CHAT_OUT.value, entry, self._signer)
        if isinstance(event, str):  # a forged frame must never reach a user's socket
            log.error("dropped chat.out entry %s: %s", entry.entry_id, event)
            self._metrics.dead_lettered.inc()
            return
        # The entry id is the frame's event_id, which a client resumes from (?since=).
        entry_id = EntryId.parse(source_id)
        if entry_id is None:  # pragma: no cover - Redis hands out nothing else
            return
        frame = frame_for(event, str(entry_id))
        if frame is not None:
            self._hub.deliver(event.user_id, entry_id, frame)
        self._metrics.handled.inc()
