"""Wiring of the decision service: subscriptions, publishers, the deadline sweeper."""

from __future__ import annotations

import asyncio
import logging

from opentelemetry.sdk.trace import TracerProvider

from memoria_contracts.streams import Group, Stream
from memoria_decision import SERVICE_NAME
from memoria_decision.chooser import Chooser
from memoria_decision.deadlines import Deadlines
from memoria_decision.executor import CycleExecutor
from memoria_decision.store import CycleStore, released_ttl_s
from memoria_llm.persona_prompt import strategy_files
from memoria_offline.selection import language_model
from memoria_runtime import redis_clients
from memoria_runtime.bus import EventPublisher, ServiceBus, create_bus, subscribe_group
from memoria_runtime.bus.memory_requests import MemoryClient
from memoria_runtime.bus.thread_gate import ThreadGate
from memoria_runtime.lifecycle import Lifecycle
from memoria_runtime.settings import DecisionSettings

log = logging.getLogger("memoria.decision")

SWEEP_INTERVAL_S = 1.0
# A decision handler spends its time waiting on the LLM (little CPU per decision around the
# call), so the bus' default of 16 at once capped a replica long before its CPU, with a core
# mostly idle (docs/benchmarks.md, throughput). 64 per stream keeps both streams' calls near
# the size of the LLM clients' own connection pools (httpx: 100).
DECISION_SLOTS = 64


def build_broker(
    settings: DecisionSettings, provider: TracerProvider | None = None
) -> tuple[ServiceBus, CycleExecutor]:
    strategy_files()  # a broken persona strategy file stops the service here, saying why
    broker = create_bus(settings.bus, tracer_provider=provider, service=SERVICE_NAME)
    redis = redis_clients.connect(settings.bus)
    publisher = EventPublisher(broker, settings.bus)
    publisher.declare(Stream.ACTIONS, "The next step of a cycle, for any action worker.")
    publisher.declare(Stream.CHAT_OUT, "The user's message echo, status lines and cycle ends.")
    publisher.declare(Stream.CHAT_IN, "The next queued message of a thread (from release).")
    engine = CycleExecutor(
        settings=settings,
        redis=redis,
        publisher=publisher,
        gate=ThreadGate(
            redis,
            lock_ttl_s=settings.cycle.thread_lock_ttl_s,
            stream_maxlen=settings.bus.stream_maxlen,
            partitions=settings.bus.partitions,
        ),
        store=CycleStore(
            redis, settings.bus.partitions, released_ttl_s=released_ttl_s(settings.bus)
        ),
        deadlines=Deadlines(redis, settings.bus.partitions),
        memory=MemoryClient(broker, settings.bus),
        chooser=Chooser(settings, redis, language_model(settings.llm)),
    )
    for stream, handler, description in (
        (Stream.CHAT_IN, engine.on_chat_in, "Start a thought cycle for a user message."),
        (Stream.ACTIONS_DONE, engine.on_action_done, "Record a step, then decide or end."),
    ):
        subscribe_group(
            broker,
            settings.bus,
            stream=stream,
            group=Group.DECISION,
            handler=handler,
            description=description,
            slots=DECISION_SLOTS,
        )
    return broker, engine


async def _sweep_forever(engine: CycleExecutor) -> None:
    while True:
        try:
            await engine.sweep_deadlines()
        except Exception:  # keep sweeping: one bad cycle must not stop timeouts for all
            log.exception("deadline sweep failed")
        await asyncio.sleep(SWEEP_INTERVAL_S)


def build_app(settings: DecisionSettings, provider: TracerProvider | None = None) -> Lifecycle:
    broker, engine = build_broker(settings, provider)
    lifecycle = Lifecycle()

    async def close_clients() -> None:
        await engine.chooser.llm.aclose()
        await engine.redis.aclose()

    async def say_ready() -> None:
        log.info("decision ready (LLM: %s)", engine.chooser.llm.name)

    lifecycle.add(stop=close_clients)
    lifecycle.add(broker.start, broker.stop)
    lifecycle.add_task(lambda: _sweep_forever(engine))
    lifecycle.add(say_ready)
    return lifecycle
