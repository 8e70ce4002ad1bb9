"""Wiring of the action worker: the registry, the step runner, the catalog advert."""

from __future__ import annotations

import contextlib
import logging

from opentelemetry.sdk.trace import TracerProvider

from memoria_action_worker import SERVICE_NAME
from memoria_action_worker.registry import load_actions
from memoria_action_worker.runner import StepRunner
from memoria_contracts.streams import Group, Stream
from memoria_llm.persona_prompt import strategy_files
from memoria_offline.selection import language_model
from memoria_runtime import catalog, redis_clients
from memoria_runtime.bus import EventPublisher, ServiceBus, create_bus, subscribe_group
from memoria_runtime.bus.memory_requests import MemoryClient
from memoria_runtime.lifecycle import Lifecycle
from memoria_runtime.personas import load_personas
from memoria_runtime.refresh import keep_refreshed
from memoria_runtime.settings import ActionWorkerSettings, BusSettings

log = logging.getLogger("memoria.action_worker")


def build_broker(
    settings: ActionWorkerSettings, provider: TracerProvider | None = None
) -> tuple[ServiceBus, StepRunner]:
    load_personas(settings.cycle)  # the default persona of requests without one; checked here
    strategy_files()  # a broken persona strategy file stops the worker here, saying why
    broker = create_bus(settings.bus, tracer_provider=provider, service=SERVICE_NAME)
    publisher = EventPublisher(broker, settings.bus)
    publisher.declare(Stream.ACTIONS_DONE, "A step's outcome, for decision.")
    publisher.declare(Stream.CHAT_OUT, "Status lines, streamed deltas and messages of a step.")
    runner = StepRunner(
        settings=settings,
        worker=settings.bus.consumer,
        llm_prices=settings.llm.llm_prices,
        redis=redis_clients.connect(settings.bus),
        publisher=publisher,
        llm=language_model(settings.llm),
        memory=MemoryClient(broker, settings.bus),
        actions=load_actions(extra_modules=settings.cycle.action_modules).enabled(
            settings.cycle.actions_disabled
        ),
    )
    subscribe_group(
        broker,
        settings.bus,
        stream=Stream.ACTIONS,
        group=Group.ACTION_WORKER,
        handler=runner.on_action_requested,
        description="Run one step of a cycle (workers share the group and scale out).",
    )
    return broker, runner


async def _advertise_forever(runner: StepRunner, settings: BusSettings) -> None:
    specs = [registered.spec for registered in runner.actions.values()]
    await keep_refreshed(
        lambda: catalog.advertise(
            runner.redis,
            settings.consumer,
            specs,
            settings.catalog_ttl_seconds,
            partitions=settings.partitions,
        ),
        ttl_s=settings.catalog_ttl_seconds,
        what="the action catalog advert",
    )


def build_app(settings: ActionWorkerSettings, provider: TracerProvider | None = None) -> Lifecycle:
    broker, runner = build_broker(settings, provider)
    lifecycle = Lifecycle()

    async def close_clients() -> None:
        await runner.llm.aclose()
        await runner.redis.aclose()

    async def withdraw_advert() -> None:
        with contextlib.suppress(Exception):  # it expires anyway
            await catalog.withdraw(
                runner.redis, settings.bus.consumer, partitions=settings.bus.partitions
            )

    async def say_ready() -> None:
        log.info("action worker ready: %s (LLM: %s)", ", ".join(runner.actions), runner.llm.name)

    lifecycle.add(stop=close_clients)
    lifecycle.add(broker.start, broker.stop)
    lifecycle.add(stop=withdraw_advert)
    lifecycle.add_task(lambda: _advertise_forever(runner, settings.bus))
    lifecycle.add(say_ready)
    return lifecycle
