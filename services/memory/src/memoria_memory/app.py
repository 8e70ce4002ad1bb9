"""Wiring of the memory service: subscriptions, storage lifecycle."""

from __future__ import annotations

import logging

from faststream import FastStream
from faststream.redis import RedisBroker
from opentelemetry.sdk.trace import TracerProvider

from memoria_contracts.streams import Group, Stream
from memoria_memory.handlers import MemoryService
from memoria_runtime.bus import create_broker, subscribe_group
from memoria_runtime.settings import Settings

log = logging.getLogger("memoria.memory")


def build_broker(
    settings: Settings, provider: TracerProvider | None = None
) -> tuple[RedisBroker, MemoryService]:
    broker = create_broker(settings, tracer_provider=provider)
    service = MemoryService(settings.effective_docstore_url)
    subscribe_group(
        broker,
        settings,
        stream=Stream.CHAT_OUT,
        group=Group.MEMORY_HISTORY,
        handler=service.on_chat_out,
        description="Persist every non-transient chat message of a thread.",
    )
    subscribe_group(
        broker,
        settings,
        stream=Stream.MEMORY_RPC,
        group=Group.MEMORY,
        handler=service.on_request,
        description="Answer history queries (request/reply).",
    )
    return broker, service


def build_app(settings: Settings, provider: TracerProvider | None = None) -> FastStream:
    broker, service = build_broker(settings, provider)
    app = FastStream(broker)

    @app.on_startup
    async def open_storage() -> None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        await service.open()
        log.info("documents in %s", settings.effective_docstore_url.rpartition("@")[2])

    @app.on_shutdown
    async def close_storage() -> None:
        await service.close()

    return app
