"""Wiring of the memory service: subscriptions, storage lifecycle, the reconciler, the
background upkeep (content keys of old memories, cycle traces past retention)."""

from __future__ import annotations

import asyncio
import logging

from opentelemetry.sdk.trace import TracerProvider

from memoria_contracts.streams import Group, Stream
from memoria_memory import SERVICE_NAME
from memoria_memory.cycle_log import CycleLog, purge_forever
from memoria_memory.handlers import MemoryHandlers
from memoria_memory.history_catch_up import HistoryCatchUp
from memoria_memory.memories import content_keys, lexical_index
from memoria_memory.memories.reconciler import Reconciler
from memoria_memory.memories.repository import MemoryRepository
from memoria_memory.storage import MemoryStorage
from memoria_memory.threads import ThreadRepository
from memoria_memory.vectors import VectorStore
from memoria_runtime.bus import ServiceBus, create_bus, subscribe_group
from memoria_runtime.lifecycle import Lifecycle
from memoria_runtime.personas import load_personas
from memoria_runtime.settings import MemoryServiceSettings, MemorySettings

log = logging.getLogger("memoria.memory")


def build_broker(
    settings: MemoryServiceSettings, provider: TracerProvider | None = None
) -> tuple[ServiceBus, MemoryHandlers]:
    load_personas(settings.cycle)  # a bad personas file stops the service here, saying why
    broker = create_bus(settings.bus, tracer_provider=provider, service=SERVICE_NAME)
    handlers = MemoryHandlers(settings)
    subscribe_group(
        broker,
        settings.bus,
        stream=Stream.CHAT_OUT,
        group=Group.MEMORY_HISTORY,
        handler=handlers.on_chat_out,
        description="Persist every non-transient chat message of a thread; keep every "
        "message and cycle end of a cycle in its trace.",
    )
    subscribe_group(
        broker,
        settings.bus,
        stream=Stream.MEMORY_RPC,
        group=Group.MEMORY,
        handler=handlers.on_request,
        description="Answer history, memory and thread requests (request/reply): embed, "
        "search, get, list, history, save, update, delete; list, create, rename threads; "
        "read and change a thread's session config; a cycle's trace.",
    )
    for stream in (Stream.CHAT_IN, Stream.ACTIONS, Stream.ACTIONS_DONE):
        subscribe_group(
            broker,
            settings.bus,
            stream=stream,
            group=Group.MEMORY_TRACE,  # its own group: takes no entry from decision or workers
            handler=handlers.on_cycle_event,
            description="Keep the user messages, step requests and step outcomes of every "
            "cycle in its trace (GET /api/cycles/{cycle_id}).",
        )
    return broker, handlers


async def _backfill_content_keys(repo: MemoryRepository) -> None:
    try:
        await content_keys.backfill(repo)
    except Exception:  # retried at the next start; saves still work, only dedupe is missed
        log.exception("giving old memories their content key failed")


async def _backfill_lexical_index(repo: MemoryRepository, vectors: VectorStore) -> None:
    try:
        await lexical_index.backfill(repo, vectors)
    except Exception:  # goes on from where it stopped at the next start
        log.exception("indexing the text of old memories failed")


async def _reconcile_forever(reconciler: Reconciler, settings: MemorySettings) -> None:
    while True:
        await asyncio.sleep(settings.reconcile_interval_seconds)
        try:
            await reconciler.run_once(grace_seconds=settings.reconcile_grace_seconds)
        except Exception:  # storage may be briefly away; the next round tries again
            log.exception("periodic reconcile failed")


def build_app(settings: MemoryServiceSettings, provider: TracerProvider | None = None) -> Lifecycle:
    broker, handlers = build_broker(settings, provider)
    lifecycle = Lifecycle()

    async def open_storage() -> None:
        settings.storage.data_dir.mkdir(parents=True, exist_ok=True)
        storage = await MemoryStorage.open(settings)
        threads = ThreadRepository(storage.documents)
        await threads.setup()
        handlers.attach(storage, threads, HistoryCatchUp(storage.broker, settings.bus.partitions))
        cycles = CycleLog(storage.documents)
        await cycles.setup()
        handlers.attach_cycle_log(cycles)
        # Before serving: a write a crash interrupted is finished before anyone reads.
        await storage.reconciler.run_once(grace_seconds=None)
        log.info("documents in %s", settings.storage.effective_docstore_url.rpartition("@")[2])

    async def close_storage() -> None:
        await handlers.storage.close()

    lifecycle.add(open_storage, close_storage)
    # Readers start once storage is open and stop (letting their handlers finish) before it
    # closes.
    lifecycle.add(broker.start, broker.stop)
    lifecycle.add_task(lambda: _reconcile_forever(handlers.storage.reconciler, settings.memory))
    lifecycle.add_task(lambda: handlers.health.probe_forever(handlers.storage.documents))
    lifecycle.add_readiness_check(handlers.health.readiness)
    lifecycle.add_task(
        lambda: purge_forever(handlers.cycles, settings.memory.cycle_trace_retention_days)
    )
    # In the background: a store of many old memories must not hold the service back.
    lifecycle.add_task(lambda: _backfill_content_keys(handlers.storage.writer.repo))
    lifecycle.add_task(
        lambda: _backfill_lexical_index(handlers.storage.writer.repo, handlers.storage.vectors)
    )
    return lifecycle
