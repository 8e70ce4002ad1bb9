"""One way to build the broker, so every service has the same middlewares, limits, stream
readers and reply inbox."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from faststream.redis import RedisBroker, StreamSub
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer
from redis.asyncio import Redis

from memoria_contracts.events import Envelope
from memoria_runtime import redis_clients
from memoria_runtime.bus.replies import ReplyInbox
from memoria_runtime.settings import Settings

_BROKER_LOGGER = "memoria.broker"
_UNNAMED_SERVICE = "memoria"


class StreamReader(Protocol):
    """A loop reading a stream with the bus' client (a consumer group, the gateway's
    fan-out), started and stopped with the broker."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass(frozen=True)
class ReaderDocs:
    """How a reader appears in the AsyncAPI document."""

    stream: StreamSub
    title: str
    description: str


class MemoriaBroker(RedisBroker):
    """FastStream's Redis broker (entry framing, AsyncAPI declarations) plus the bus' own
    stream readers (consumer.py, the gateway's fan-out) and reply inbox (replies.py), which
    start and stop with it. Why they are not FastStream subscribers: ADR 0013."""

    def __init__(
        self,
        settings: Settings,
        *,
        service: str,
        tracer: Tracer,
        **options: Any,
    ) -> None:
        super().__init__(settings.effective_redis_url, **options)
        self.service = service
        self.tracer = tracer
        self._settings = settings
        self._readers: list[tuple[StreamReader, ReaderDocs]] = []
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
    def replies(self) -> ReplyInbox:
        if self._inbox is None:
            self._inbox = ReplyInbox(self.redis, self.message_format, self._settings.consumer)
        return self._inbox

    def add_reader(self, reader: StreamReader, docs: ReaderDocs) -> None:
        self._readers.append((reader, docs))

    def document_readers(self) -> None:
        """Declare each reader as a FastStream subscriber, for the AsyncAPI document only: a
        broker that runs must not call this (FastStream would start them too)."""
        for _, docs in self._readers:
            subscriber = self.subscriber(
                stream=docs.stream, title=docs.title, description=docs.description
            )

            async def documented(event: Envelope) -> None:  # pragma: no cover - never runs
                return None

            subscriber(documented)

    async def start(self) -> None:
        await super().start()
        for reader, _ in self._readers:
            await reader.start()

    async def stop(
        self,
        exc_type: type[BaseException] | None = None,
        exc_val: BaseException | None = None,
        exc_tb: TracebackType | None = None,
    ) -> None:
        await asyncio.gather(*(reader.stop() for reader, _ in self._readers))
        if self._inbox is not None:
            await self._inbox.close()
            self._inbox = None
        await super().stop(exc_type, exc_val, exc_tb)
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None


def create_broker(
    settings: Settings,
    *,
    tracer_provider: TracerProvider | None = None,
    service: str | None = None,
) -> MemoriaBroker:
    """``service`` labels the bus' metrics and names its spans' tracer."""
    # Nothing runs through FastStream's subscribers or publish any more; its logger only
    # speaks at start and stop.
    broker_logger = logging.getLogger(_BROKER_LOGGER)
    if settings.log_level.upper() != "DEBUG":
        broker_logger.setLevel(logging.WARNING)
    provider = tracer_provider or trace.get_tracer_provider()
    return MemoriaBroker(
        settings,
        service=service or _UNNAMED_SERVICE,
        tracer=provider.get_tracer("memoria.bus"),
        graceful_timeout=settings.shutdown_grace_seconds,
        logger=broker_logger,
        # FastStream's own pool: the retries and keepalive of every other client, which it
        # would not have by default.
        **redis_clients.connection_options(),
    )
