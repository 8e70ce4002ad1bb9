"""The one lifecycle of every service process, the gateway's included: logging, tracing,
the ops port (metrics and probes), the shared bus key, health, presence, signals, clean
shutdown (ADR 0025)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from typing import TypeVar

from opentelemetry.sdk.trace import TracerProvider

from memoria_runtime import ops, presence, redis_clients
from memoria_runtime.bus import retention
from memoria_runtime.bus.layout import ensure_same_layout
from memoria_runtime.bus.signing import ensure_shared_key, signer_for
from memoria_runtime.files import keep_files_private
from memoria_runtime.health import Health, heartbeat
from memoria_runtime.heap import freeze_startup_objects
from memoria_runtime.instance import instance_of, resolved_data_dir
from memoria_runtime.lifecycle import Lifecycle
from memoria_runtime.logs import configure_logging
from memoria_runtime.personas import PersonaConfigError
from memoria_runtime.redaction import redact
from memoria_runtime.refresh import keep_refreshed
from memoria_runtime.settings import BusSettings, ServiceProcessSettings
from memoria_runtime.telemetry import setup_tracing

ProcessSettings = TypeVar("ProcessSettings", bound=ServiceProcessSettings)


def _health_steps(lifecycle: Lifecycle, settings: BusSettings, health: Health) -> None:
    """Report ``health``: serving once every other start-up step has run, stopping once
    shutdown begins, and a heartbeat that pings the broker in between."""
    redis = redis_clients.connect(settings)

    async def close() -> None:
        await redis.aclose()

    async def report_serving() -> None:
        health.serving()

    async def report_stopping() -> None:
        health.stopping()

    lifecycle.add(stop=close)
    lifecycle.add_task(lambda: heartbeat(health, redis.ping))
    lifecycle.add(report_serving, report_stopping)  # the last step: stopping is said first


def _presence_steps(lifecycle: Lifecycle, settings: BusSettings, service: str) -> None:
    """Announce in the broker (presence.py) that this process serves, and which Memoria it
    serves (instance.py), from when every start-up step has run until shutdown: `memoria
    run` waits for the memory service's announcement, `memoria doctor` checks every
    service's."""
    redis = redis_clients.connect(settings)

    async def announce_forever() -> None:
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
        await keep_refreshed(announce, ttl_s=settings.catalog_ttl_seconds, what=what)

    async def withdraw_and_close() -> None:
        with contextlib.suppress(Exception):  # it expires anyway
            await presence.withdraw(redis, settings.consumer)
        await redis.aclose()

    lifecycle.add(stop=withdraw_and_close)
    lifecycle.add_task(announce_forever)


def _retention_steps(lifecycle: Lifecycle, settings: BusSettings) -> None:
    """Trim every stream by age, never past what a group still needs (bus/retention.py)."""
    redis = redis_clients.connect(settings)

    async def close() -> None:
        await redis.aclose()

    lifecycle.add(stop=close)
    lifecycle.add_task(lambda: retention.keep_trimmed(redis, settings))


def service_lifecycle(
    service: str,
    settings: BusSettings,
    own: Lifecycle,
    health: Health,
    *,
    freeze_heap: bool = True,
) -> Lifecycle:
    """``own`` (the service's parts: its bus, storage, background loops) wrapped in what
    every service does around them. ``freeze_heap``: the process is the service's own, so
    what start-up made can leave the garbage collector's reach (heap.py); not in a process
    that hosts it among other things, such as a test's."""
    lifecycle = Lifecycle()

    async def same_bus_key_as_the_others() -> None:
        """Refuse to serve with another bus secret than the running services' (signing.py),
        or with the streams split another way (layout.py)."""
        redis = redis_clients.connect(settings)
        try:
            await ensure_shared_key(redis, signer_for(settings))
            await ensure_same_layout(redis, settings.bus_layout)
        finally:
            await redis.aclose()

    lifecycle.add(same_bus_key_as_the_others)
    lifecycle.include(own)
    if freeze_heap:

        async def freeze_startup_heap() -> None:
            freeze_startup_objects()

        lifecycle.add(freeze_startup_heap)
    _presence_steps(lifecycle, settings, service)
    _retention_steps(lifecycle, settings)
    _health_steps(lifecycle, settings, health)
    for check in lifecycle.readiness_checks:
        health.add_check(check)
    return lifecycle


async def serve_until_stopped(lifecycle: Lifecycle) -> None:
    """Start, serve until SIGINT or SIGTERM, then stop (readers let what they run finish
    for MEMORIA_SHUTDOWN_GRACE_SECONDS)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await lifecycle.start()
        try:
            await stop.wait()
        finally:
            await lifecycle.stop()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def run_service(
    name: str,
    settings_class: type[ProcessSettings],
    build: Callable[[ProcessSettings, TracerProvider], Lifecycle],
) -> None:
    """Run until SIGINT/SIGTERM, reading from the environment only ``settings_class``: the
    settings the service uses, so no other component's secret reaches the process and no
    other component's malformed variable stops it."""
    keep_files_private()
    settings = settings_class.load()
    configure_logging(settings.telemetry.log_level)
    provider = setup_tracing(name, settings.telemetry)
    logging.getLogger(f"memoria.{name}").info(
        "starting as consumer %s on %s",
        settings.bus.consumer,
        redact(settings.bus.effective_redis_url),
    )
    health = Health()
    stop_ops = (
        ops.serve(settings.telemetry.metrics_port, health)
        if settings.telemetry.metrics_port
        else None
    )
    try:
        try:
            own = build(settings, provider)
        except PersonaConfigError as exc:
            raise SystemExit(f"memoria {name}: {exc}") from None  # the message, no traceback
        asyncio.run(serve_until_stopped(service_lifecycle(name, settings.bus, own, health)))
    finally:
        if stop_ops is not None:
            stop_ops()
        provider.shutdown()
