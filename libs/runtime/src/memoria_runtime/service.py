"""Start a FastStream-based service process: logging, tracing, metrics, signals, clean
shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from faststream import FastStream
from opentelemetry.sdk.trace import TracerProvider

from memoria_runtime import metrics
from memoria_runtime.logs import configure_logging
from memoria_runtime.settings import Settings
from memoria_runtime.telemetry import setup_tracing

AppFactory = Callable[[Settings, TracerProvider], FastStream]


def run_service(name: str, build_app: AppFactory) -> None:
    """Run until SIGINT/SIGTERM (FastStream handles both and lets handlers finish)."""
    settings = Settings()
    configure_logging(settings.log_level)
    provider = setup_tracing(name, settings)
    logging.getLogger(f"memoria.{name}").info(
        "starting as consumer %s on %s", settings.consumer, settings.effective_redis_url
    )
    stop_metrics = (
        metrics.serve(settings.metrics_port) if settings.metrics_port is not None else None
    )
    try:
        asyncio.run(build_app(settings, provider).run())
    finally:
        if stop_metrics is not None:
            stop_metrics()
        provider.shutdown()
