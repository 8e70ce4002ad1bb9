"""Start a FastStream-based service process: logging, tracing, the ops port (metrics and
probes), signals, clean shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable

from faststream import FastStream
from opentelemetry.sdk.trace import TracerProvider

from memoria_runtime import ops, presence, redis_clients
from memoria_runtime.bus.signing import ensure_shared_key, signer_for
from memoria_runtime.health import Health, heartbeat, stop_task
from memoria_runtime.heap import freeze_startup_objects
from memoria_runtime.instance import instance_of, resolved_data_dir
from memoria_runtime.logs import configure_logging
from memoria_runtime.personas import PersonaConfigError
from memoria_runtime.refresh import keep_refreshed
from memoria_runtime.settings import Settings
from memoria_runtime.telemetry import setup_tracing

AppFactory = Callable[[Settings, TracerProvider], FastStream]


def watch_health(app: FastStream, settings: Settings, health: Health) -> None:
    """Report ``health`` from ``app``'s lifecycle: serving once every startup hook has run
    (hooks registered later run later, so the service's own come first), stopping once
    shutdown begins, and a heartbeat that pings the broker in between."""
    beat: list[asyncio.Task[None]] = []
    redis = redis_clients.connect(settings)

    @app.after_startup
    async def report_serving() -> None:
        health.serving()
        beat.append(asyncio.create_task(heartbeat(health, redis.ping)))

    @app.on_shutdown
    async def report_stopping() -> None:
        health.stopping()
        for task in beat:
            await stop_task(task)
        await redis.aclose()


def announce_presence(app: FastStream, settings: Settings, service: str) -> None:
    """Announce in the broker (presence.py) that this process serves, and which Memoria it
    serves (instance.py), from when every startup hook has run until shutdown: `memoria run`
    waits for the memory service's announcement, `memoria doctor` checks every service's."""
    redis = redis_clients.connect(settings)
    refreshing: list[asyncio.Task[None]] = []

    @app.after_startup
    async def announce_serving() -> None:
        serving_since = time.time()
        data_dir = resolved_data_dir(settings)

        async def announce() -> None:
            await presence.announce(
                redis,
                presence.Presence(
                    service=service,
                    consumer=settings.consumer,
                    pid=os.getpid(),
                    serving_since=serving_since,
                    expires_at=time.time() + settings.catalog_ttl_seconds,
                    instance=instance_of(settings),
                    data_dir=str(data_dir),
                ),
            )

        what = f"the {service} service's presence"
        refresh = keep_refreshed(announce, ttl_s=settings.catalog_ttl_seconds, what=what)
        refreshing.append(asyncio.create_task(refresh))

    @app.on_shutdown
    async def withdraw_presence() -> None:
        for task in refreshing:
            await stop_task(task)
        with contextlib.suppress(Exception):  # it expires anyway
            await presence.withdraw(redis, settings.consumer)
        await redis.aclose()


def check_bus_key(app: FastStream, settings: Settings) -> None:
    """Refuse to serve with another bus secret than the running services' (signing.py)."""

    @app.on_startup
    async def same_bus_key_as_the_others() -> None:
        redis = redis_clients.connect(settings)
        try:
            await ensure_shared_key(redis, signer_for(settings))
        finally:
            await redis.aclose()


def freeze_heap_when_up(app: FastStream) -> None:
    """Take what start-up made out of the garbage collector's reach (heap.py), once the
    service's own start-up hooks (registered earlier, so run earlier) are done."""

    @app.after_startup
    async def freeze_startup_heap() -> None:
        freeze_startup_objects()


def run_service(name: str, build_app: AppFactory) -> None:
    """Run until SIGINT/SIGTERM (FastStream handles both and lets handlers finish)."""
    settings = Settings()
    configure_logging(settings.log_level)
    provider = setup_tracing(name, settings)
    logging.getLogger(f"memoria.{name}").info(
        "starting as consumer %s on %s", settings.consumer, settings.effective_redis_url
    )
    health = Health()
    stop_ops = ops.serve(settings.metrics_port, health) if settings.metrics_port else None
    try:
        try:
            app = build_app(settings, provider)
        except PersonaConfigError as exc:
            raise SystemExit(f"memoria {name}: {exc}") from None  # the message, no traceback
        check_bus_key(app, settings)
        freeze_heap_when_up(app)
        watch_health(app, settings, health)
        announce_presence(app, settings, name)
        asyncio.run(app.run())
    finally:
        if stop_ops is not None:
            stop_ops()
        provider.shutdown()
