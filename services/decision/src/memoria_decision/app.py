"""Wiring of the decision service: subscriptions, publishers, the deadline sweeper."""

from __future__ import annotations

import asyncio
import logging

from opentelemetry.sdk.trace import TracerProvider

from memoria_contracts.streams import Group, Stream
from memoria_decision import SERVICE_NAME
from memoria_decision.cycle import CycleEngine
from memoria_decision.deadlines import Deadlines
from memoria_decision.handlers import DecisionHandlers
from memoria_decision.state import CycleStore
from memoria_llm.persona_prompt import strategy_files
from memoria_offline.selection import language_model
from memoria_runtime import redis_clients
from memoria_runtime.bus import EventPublisher, MemoriaBroker, create_broker, subscribe_group
from memoria_runtime.gate import ThreadGate
from memoria_runtime.lifecycle import Lifecycle
from memoria_runtime.memory_client import MemoryClient
from memoria_runtime.personas import load_personas
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
) -> tuple[MemoriaBroker, CycleEngine]:
    load_personas(settings)  # a bad personas file stops the service here, saying why
    strategy_files()  # so would a broken persona strategy file
    broker = create_broker(settings, tracer_provider=provider, service=SERVICE_NAME)
    redis = redis_clients.connect(settings)
    publisher = EventPublisher(broker, settings)
    publisher.declare(Stream.ACTIONS, "The next step of a cycle, for any action worker.")
    publisher.declare(Stream.CHAT_OUT, "The user's message echo, status lines and cycle ends.")
    publisher.declare(Stream.CHAT_IN, "The next queued message of a thread (from release).")
    engine = CycleEngine(
        settings=settings,
        llm_prices=settings.llm_prices,
        redis=redis,
        publisher=publisher,
        gate=ThreadGate(
            redis,
            lock_ttl_s=settings.thread_lock_ttl_s,
            stream_maxlen=settings.stream_maxlen,
            partitions=settings.partitions,
        ),
        store=CycleStore(redis, settings.partitions),
        deadlines=Deadlines(redis, settings.partitions),
        memory=MemoryClient(broker, settings),
        llm=language_model(settings),
    )
    handlers = DecisionHandlers(engine)
    subscribe_group(
        broker,
        settings,
        stream=Stream.CHAT_IN,
        group=Group.DECISION,
        handler=handlers.on_chat_in,
        description="Start a thought cycle for a user message.",
        slots=DECISION_SLOTS,
    )
    subscribe_group(
        broker,
        settings,
        stream=Stream.ACTIONS_DONE,
        group=Group.DECISION,
        handler=handlers.on_action_done,
        description="Record a step's outcome, then decide the next step or end the cycle.",
        slots=DECISION_SLOTS,
    )
    return broker, engine


async def _sweep_forever(engine: CycleEngine) -> None:
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
        await engine.llm.aclose()
        await engine.redis.aclose()

    async def say_ready() -> None:
        log.info("decision ready (LLM: %s)", engine.llm.name)

    lifecycle.add(stop=close_clients)
    lifecycle.add(broker.start, broker.stop)
    lifecycle.add_task(lambda: _sweep_forever(engine))
    lifecycle.add(say_ready)
    return lifecycle
