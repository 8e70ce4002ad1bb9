"""Consumer-group subscriptions with at-least-once delivery.

For each (stream, group) a service reads, two FastStream subscribers share one consumer name:

* the **reader** takes new entries (``XREADGROUP >``);
* the **reclaimer** takes entries that sat unacknowledged longer than ``reclaim_idle_ms``
  (``XAUTOCLAIM``) — left behind by a consumer that crashed or failed. FastStream's
  ``StreamSub(min_idle_time=...)`` subscriber only ever reclaims and never reads new entries,
  which is why both are needed (see docs/architecture.md).

An entry is acknowledged only after its handler returns. A handler that raises leaves it
pending; the reclaimer retries it, and after ``max_deliveries`` it goes to the dead-letter
stream. An entry that cannot be parsed is dead-lettered on its first reclaim. While a handler
runs (an LLM call can be slow) its entry is re-claimed periodically so that no other consumer
steals it from a live worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from faststream import AckPolicy
from faststream.message import StreamMessage as FastStreamMessage
from faststream.redis import RedisBroker, RedisResponse, StreamSub
from pydantic import ValidationError

from memoria_contracts.events import Envelope
from memoria_contracts.streams import Group, Stream
from memoria_runtime.bus.deadletter import dead_letter
from memoria_runtime.bus.entries import DATA_FIELD
from memoria_runtime.bus.signing import reply_channel, signer_for
from memoria_runtime.settings import Settings
from memoria_runtime.stream_message import StreamMessage

log = logging.getLogger("memoria.bus")

_KEEPALIVES_PER_IDLE = 3  # re-claim a running entry three times per reclaim window


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


def _raw_body(message: FastStreamMessage[Any]) -> bytes:
    return bytes(message.body)


def _delivery(message: Any, group: Group, *, redelivered: bool) -> Delivery:
    raw = message.raw_message
    return Delivery(
        stream=raw["channel"],
        group=group.value,
        entry_id=raw["message_ids"][0].decode(),
        data=raw["data"].get(DATA_FIELD, b""),
        redelivered=redelivered,
    )


@contextlib.asynccontextmanager
async def _kept_claimed(
    redis: Any, delivery: Delivery, consumer: str, interval_s: float
) -> AsyncIterator[None]:
    """Reset the entry's idle time while the handler runs (XCLAIM JUSTID does not count as a
    delivery), so the reclaim window can be short without stealing from slow live handlers."""

    async def keepalive() -> None:
        while True:
            await asyncio.sleep(interval_s)
            await redis.xclaim(
                delivery.stream,
                delivery.group,
                consumer,
                min_idle_time=0,
                message_ids=[delivery.entry_id],
                justid=True,
            )

    task = asyncio.create_task(keepalive())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def subscribe_group(
    broker: RedisBroker,
    settings: Settings,
    *,
    stream: Stream,
    group: Group,
    handler: EventHandler,
    description: str,
    concurrent: bool = True,
) -> None:
    """Register the reader and the reclaimer of ``stream`` for ``group``."""
    consumer = settings.consumer
    keepalive_s = settings.reclaim_idle_ms / 1000 / _KEEPALIVES_PER_IDLE
    workers = settings.consumer_concurrency if concurrent else None
    signer = signer_for(settings)

    async def refuse(message: Any, reason: str, *, redelivered: bool) -> None:
        delivery = _delivery(message, group, redelivered=redelivered)
        log.error("dead-lettered %s %s: %s", delivery.stream, delivery.entry_id, reason)
        await dead_letter(
            message.consumer,
            stream=delivery.stream,
            group=delivery.group,
            entry_id=delivery.entry_id,
            data=delivery.data,
            reason=reason,
            maxlen=settings.stream_maxlen,
        )

    async def run(event: Envelope, message: Any, *, redelivered: bool) -> RedisResponse | None:
        delivery = _delivery(message, group, redelivered=redelivered)
        async with _kept_claimed(message.consumer, delivery, consumer, keepalive_s):
            reply = await handler(event, delivery)
        if reply is None:
            return None
        body = reply.model_dump_json().encode()
        return RedisResponse(body, headers=signer.headers(reply_channel(event.event_id), body))

    # No more than we can work on: an XREADGROUP without COUNT takes the whole backlog into
    # this consumer's pending list, where no newly started replica can get at it and where
    # it ages towards the reclaimer. Scaling out depends on this.
    reader = broker.subscriber(
        stream=StreamSub(
            stream.value,
            group=group.value,
            consumer=consumer,
            max_records=settings.consumer_concurrency,
        ),
        ack_policy=AckPolicy.NACK_ON_ERROR,
        max_workers=workers,
        title=f"{stream.value}:{group.value}",
        description=description,
    )

    @reader
    async def on_event(event: Envelope, message: StreamMessage) -> RedisResponse | None:
        # Parsing is pure; nothing acts on the event before its signature holds.
        problem = signer.problem(stream.value, bytes(message.body), message.headers)
        if problem is not None:
            await refuse(message, problem, redelivered=False)
            return None
        return await run(event, message, redelivered=False)

    reclaimer = broker.subscriber(
        stream=StreamSub(
            stream.value,
            group=group.value,
            consumer=consumer,
            min_idle_time=settings.reclaim_idle_ms,
        ),
        ack_policy=AckPolicy.NACK_ON_ERROR,
        decoder=_raw_body,
        include_in_schema=False,
    )

    @reclaimer
    async def on_reclaimed(body: bytes, message: StreamMessage) -> RedisResponse | None:
        deliveries = await message.get_delivery_count()
        reason = signer.problem(stream.value, body, message.headers)
        event: Envelope | None = None
        if reason is None and deliveries > settings.max_deliveries:
            reason = f"failed {deliveries - 1} times"
        elif reason is None:
            try:
                event = Envelope.model_validate_json(body)
            except ValidationError as exc:
                reason = f"unparseable envelope: {exc.errors(include_input=False)[:3]}"
        if event is None:
            await refuse(message, reason or "unknown", redelivered=True)
            return None
        log.warning("reclaimed %s %s (delivery %d)", stream.value, event.event_id, deliveries)
        return await run(event, message, redelivered=True)
