"""The gateway's parts: broker with the chat.out fan-out, thread gate, intake, sockets."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from faststream.redis import RedisBroker, StreamSub
from faststream.redis.subscriber.usecases.stream_subscriber import StreamSubscriber
from opentelemetry.sdk.trace import TracerProvider

from memoria_contracts.events import Envelope
from memoria_contracts.streams import Stream
from memoria_gateway import SERVICE_NAME
from memoria_gateway.frames import frame_for
from memoria_gateway.hub import ConnectionHub
from memoria_gateway.intake import Intake
from memoria_gateway.replay import ChatOutLog
from memoria_gateway.resume import EntryId
from memoria_runtime import redis_clients
from memoria_runtime.auth import TokenIssuer
from memoria_runtime.bus import EventPublisher, create_broker
from memoria_runtime.bus.signing import Signer, signer_for
from memoria_runtime.gate import ThreadGate
from memoria_runtime.memory_client import MemoryClient
from memoria_runtime.settings import Settings
from memoria_runtime.stream_message import StreamMessage

log = logging.getLogger("memoria.gateway")

# redis-py's default pool holds at most 100 connections and refuses the 101st command in
# flight ("Too many connections"): 200 sockets sending at once got broker_unavailable. The
# gateway keeps that cap (for the broker's sake) but a burst waits for a free connection.
REDIS_POOL_SIZE = 100
REDIS_POOL_WAIT_S = 10.0


@dataclass
class Gateway:
    """Everything the routes need; the token issuer is set at start-up (it may create the
    secret file)."""

    settings: Settings
    broker: RedisBroker
    redis: Any
    intake: Intake
    memory: MemoryClient
    chat_out: ChatOutLog
    fan_out: StreamSubscriber
    signer: Signer
    hub: ConnectionHub = field(default_factory=ConnectionHub)
    issuer: TokenIssuer | None = None

    def tokens(self) -> TokenIssuer:
        if self.issuer is None:
            raise RuntimeError("the gateway has not started")
        return self.issuer

    async def start_fan_out_at_the_end(self) -> None:
        """Make the fan-out read from the stream's current last entry. Left at "$", each
        XREAD would ask for entries newer than the moment it is sent, and one appended
        between two reads (before the first entry arrives) would never reach a socket —
        which a resumed socket, registered before its replay was read, must be able to
        count on. Call before the broker starts."""
        newest = await self.redis.xrevrange(Stream.CHAT_OUT.value, count=1)
        self.fan_out.last_id = newest[0][0].decode() if newest else "0-0"


def build_broker(
    settings: Settings, provider: TracerProvider | None = None
) -> tuple[RedisBroker, Gateway]:
    broker = create_broker(settings, tracer_provider=provider, service=SERVICE_NAME)
    redis = redis_clients.connect_bounded(
        settings, max_connections=REDIS_POOL_SIZE, wait_s=REDIS_POOL_WAIT_S
    )
    gate = ThreadGate(
        redis, lock_ttl_s=settings.thread_lock_ttl_s, stream_maxlen=settings.stream_maxlen
    )
    # No consumer group: every gateway replica reads all of chat.out and delivers what
    # belongs to its own sockets. Entries are handled one at a time, in stream order.
    fan_out_subscriber = broker.subscriber(
        stream=StreamSub(Stream.CHAT_OUT.value),
        title=f"{Stream.CHAT_OUT.value}:gateway-fanout",
        description="Deliver messages, deltas and cycle ends to the user's sockets.",
    )
    signer = signer_for(settings)
    gateway = Gateway(
        settings=settings,
        broker=broker,
        redis=redis,
        intake=Intake(settings, broker, gate, signer),
        memory=MemoryClient(broker, settings),
        chat_out=ChatOutLog(redis, broker.message_format, signer),
        fan_out=fan_out_subscriber,
        signer=signer,
    )
    # Declared for the AsyncAPI document; the entries are appended by the thread gate's
    # script, atomically with the thread's lock and queue.
    EventPublisher(broker, settings, signer).declare(
        Stream.CHAT_IN, "A user message whose thread is free (later ones wait in its queue)."
    )

    @fan_out_subscriber
    async def fan_out(event: Envelope, message: StreamMessage) -> None:
        # StreamMessage, not FastStream's RedisStreamMessage: no worker thread per entry.
        problem = signer.problem(Stream.CHAT_OUT.value, message.body, message.headers)
        if problem is not None:  # a forged frame must never reach a user's socket
            log.error("dropped a chat.out entry for %s: %s", event.user_id, problem)
            return
        # The entry id is the frame's event_id, which a client resumes from (?since=).
        entry_id = EntryId.parse(message.raw_message["message_ids"][0])
        if entry_id is None:  # pragma: no cover - Redis hands out nothing else
            return
        frame = frame_for(event, str(entry_id))
        if frame is not None:
            gateway.hub.deliver(event.user_id, entry_id, frame.model_dump_json())

    return broker, gateway
