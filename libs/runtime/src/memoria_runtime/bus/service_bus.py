"""One way to build the bus of a service, so every service has the same client, stream
readers, reply inbox and channel declarations."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from faststream.redis.parser.binary import BinaryMessageFormatV1
from faststream.redis.parser.message import MessageFormat
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer
from redis.asyncio import Redis

from memoria_runtime import redis_clients
from memoria_runtime.bus.channels import Channel
from memoria_runtime.bus.replies import ReplyInbox
from memoria_runtime.partitions import Partitions
from memoria_runtime.settings import BusSettings

__all__ = [
    "MESSAGE_FORMAT",
    "MessageFormat",
    "ServiceBus",
    "StreamReader",
    "create_bus",
]

_UNNAMED_SERVICE = "memoria"

MESSAGE_FORMAT: type[MessageFormat] = BinaryMessageFormatV1
"""How an envelope is framed in a stream entry: FastStream's format, so entries stay what
FastStream publishers and subscribers write and read (ADR 0025)."""


class StreamReader(Protocol):
    """A loop reading a stream with the bus' client (a consumer group, the gateway's
    fan-out), started and stopped with the broker."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class ServiceBus:
    """The bus of one service (not a broker: the broker is Redis): its Redis client, its
    stream readers (consumer.py, the gateway's fan-out) and reply inbox (replies.py), which
    start and stop with it, and the channels it reads and writes (its AsyncAPI document).
    Why plain redis-py: ADR 0013; why no FastStream broker at all: ADR 0025."""

    message_format: type[MessageFormat] = MESSAGE_FORMAT

    def __init__(self, settings: BusSettings, *, service: str, tracer: Tracer) -> None:
        self.service = service
        self.tracer = tracer
        self._settings = settings
        self._readers: list[StreamReader] = []
        self.channels: list[Channel] = []
        self._redis: Redis | None = None
        self._inbox: ReplyInbox | None = None

    @property
    def redis(self) -> Redis:
        """The bus' own client (reads, acknowledgements, appends, requests), reconnecting
        after a broker restart (redis_clients.py)."""
        if self._redis is None:
            self._redis = redis_clients.connect(self._settings)
        return self._redis

    @property
    def partitions(self) -> Partitions:
        """The partitions of every stream (the same in every service of a deployment)."""
        return self._settings.partitions

    @property
    def replies(self) -> ReplyInbox:
        if self._inbox is None:
            self._inbox = ReplyInbox(
                self.redis,
                self.message_format,
                self._settings.consumer,
                sharded=self._settings.redis_cluster,
            )
        return self._inbox

    def queue_reply(self, pipe: Any, channel: str, reply: bytes) -> None:
        """Queue on ``pipe`` the publication of a reply to a request's inbox: on a cluster on
        the shard of the inbox's channel alone (``SPUBLISH``), rather than on every node."""
        if self._settings.redis_cluster:
            pipe.spublish(channel, reply)
        else:
            pipe.publish(channel, reply)

    def declare(self, channel: Channel) -> None:
        self.channels.append(channel)

    def add_reader(self, reader: StreamReader, channel: Channel) -> None:
        self._readers.append(reader)
        self.declare(channel)

    async def start(self) -> None:
        for reader in self._readers:
            await reader.start()

    async def stop(self) -> None:
        await asyncio.gather(*(reader.stop() for reader in self._readers))
        if self._inbox is not None:
            await self._inbox.close()
            self._inbox = None
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None


def create_bus(
    settings: BusSettings,
    *,
    tracer_provider: TracerProvider | None = None,
    service: str | None = None,
) -> ServiceBus:
    """``service`` labels the bus' metrics and names its spans' tracer."""
    provider = tracer_provider or trace.get_tracer_provider()
    return ServiceBus(
        settings, service=service or _UNNAMED_SERVICE, tracer=provider.get_tracer("memoria.bus")
    )
