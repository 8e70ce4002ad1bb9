"""One way to build a RedisBroker, so every service has the same middlewares and limits."""

from __future__ import annotations

import logging

from faststream.redis import RedisBroker
from faststream.redis.opentelemetry import RedisTelemetryMiddleware
from opentelemetry.sdk.trace import TracerProvider

from memoria_runtime import metrics, redis_clients
from memoria_runtime.bus.entries import tolerant_parser
from memoria_runtime.settings import Settings

_BROKER_LOGGER = "memoria.broker"


def create_broker(
    settings: Settings,
    *,
    tracer_provider: TracerProvider | None = None,
    service: str | None = None,
) -> RedisBroker:
    """``service`` labels the broker's message metrics (``app_name``)."""
    middlewares = (
        RedisTelemetryMiddleware(tracer_provider=tracer_provider),
        metrics.bus_middleware(service),
    )
    # FastStream logs every received and processed entry at INFO: one line per streamed
    # token. Keep that for MEMORIA_LOG_LEVEL=DEBUG.
    broker_logger = logging.getLogger(_BROKER_LOGGER)
    if settings.log_level.upper() != "DEBUG":
        broker_logger.setLevel(logging.WARNING)
    return RedisBroker(
        settings.effective_redis_url,
        middlewares=middlewares,
        graceful_timeout=settings.shutdown_grace_seconds,
        logger=broker_logger,
        retry=redis_clients.reconnecting(),  # FastStream's own pool would never retry
        parser=tolerant_parser,  # every subscriber: a junk entry reaches the signature check
    )
