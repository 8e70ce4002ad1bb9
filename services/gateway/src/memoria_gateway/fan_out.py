"""The chat.out fan-out: every gateway replica reads all of chat.out, every partition of it
(no consumer group), and delivers what belongs to its own sockets, one entry at a time, in
stream order. A user's frames are all in one partition (the user's), so each user's frames
arrive in the order they were sent. One blocking read waits on every partition; on a cluster
(one slot per command) there is one read per partition.

A plain ``XREAD`` loop on the bus' client rather than a FastStream subscriber: chat.out
carries every streamed token of every cycle, and FastStream's per-entry machinery cost more
than the delivery itself (ADR 0013).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from memoria_contracts.streams import Stream
from memoria_gateway.frames import frame_for
from memoria_gateway.hub import ConnectionHub
from memoria_gateway.resume import EntryId
from memoria_runtime import metrics
from memoria_runtime.bus import MemoriaBroker
from memoria_runtime.bus.channels import Channel
from memoria_runtime.bus.entries import opened, read_entry
from memoria_runtime.bus.signing import Signer
from memoria_runtime.health import stop_task

log = logging.getLogger("memoria.gateway.fan_out")

_BATCH = 100
_BLOCK_MS = 2_000
_RETRY_AFTER_S = (0.05, 0.1, 0.2, 0.5, 1.0)
FAN_OUT = "fan-out"
"""The ``group`` label of the fan-out's metrics (it reads without a consumer group)."""


class ChatOutFanOut:
    def __init__(
        self, broker: MemoriaBroker, signer: Signer, hub: ConnectionHub, *, cluster: bool
    ) -> None:
        self._broker = broker
        self._signer = signer
        self._hub = hub
        self._keys = broker.partitions.keys(Stream.CHAT_OUT.value)
        self._reads = [[key] for key in self._keys] if cluster else [self._keys]
        self._metrics = metrics.group_consumer_metrics(
            broker.service, Stream.CHAT_OUT.value, FAN_OUT
        )
        self._tasks: list[asyncio.Task[None]] = []
        broker.add_reader(
            self,
            Channel(
                Stream.CHAT_OUT.value,
                "gateway-fanout",
                "xread",
                "Deliver messages, deltas and cycle ends to the user's sockets.",
            ),
        )

    async def start(self) -> None:
        """Read each partition from its current last entry. Reading from "$" would ask, at
        each XREAD, for entries newer than the moment it is sent, and one appended between two
        reads would never reach a socket — which a resumed socket, registered before its
        replay was read, must be able to count on."""
        last_ids: dict[str, str] = {}
        for key in self._keys:
            newest: Any = await self._broker.redis.xrevrange(key, count=1)
            last_ids[key] = newest[0][0].decode() if newest else "0-0"
        self._tasks = [
            asyncio.create_task(
                self._read_forever({key: last_ids[key] for key in keys}),
                name="chat.out fan-out",
            )
            for keys in self._reads
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            await stop_task(task)
        self._tasks = []

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
                    last_ids[key] = raw_id.decode()
                    try:
                        self._deliver(raw_id, fields)
                    except Exception:  # one bad entry must not stop every user's stream
                        self._metrics.failed.inc()
                        log.exception("chat.out entry %s of %s not delivered", raw_id, key)

    def _deliver(self, raw_id: bytes, fields: dict[bytes, bytes]) -> None:
        entry = read_entry(raw_id, fields, self._broker.message_format)
        event = opened(Stream.CHAT_OUT.value, entry, self._signer)
        if isinstance(event, str):  # a forged frame must never reach a user's socket
            log.error("dropped chat.out entry %s: %s", entry.entry_id, event)
            self._metrics.dead_lettered.inc()
            return
        # The entry id is the frame's event_id, which a client resumes from (?since=).
        entry_id = EntryId.parse(raw_id)
        if entry_id is None:  # pragma: no cover - Redis hands out nothing else
            return
        frame = frame_for(event, str(entry_id))
        if frame is not None:
            self._hub.deliver(event.user_id, entry_id, frame)
        self._metrics.handled.inc()
