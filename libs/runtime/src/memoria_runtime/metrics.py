"""Prometheus metrics: the one registry a Memoria process exposes, and every metric's name.

Each process keeps its own counters; Prometheus adds them up across processes and replicas.
Every name is a constant here, so dashboards and alerts have one place to look:

* ``memoria_llm_tokens_total{model, direction, service}``: tokens the LLM calls of a service
  used (``direction``: ``input`` or ``output``);
* ``memoria_llm_cost_usd_total{model, service}``: their estimated cost (``MEMORIA_LLM_PRICES``);
* ``memoria_cycles_total{reason}`` and ``memoria_cycle_duration_seconds``: ended cycles
  (decision);
* ``faststream_*``: FastStream's message metrics (received, processed, published, durations),
  labelled ``app_name`` = the service;
* ``process_*``, ``python_*``: the process itself.

The gateway serves them at ``/metrics`` on its own port; the other services on their ops
port, ``MEMORIA_METRICS_PORT``, when it is set (:mod:`memoria_runtime.ops`).
"""

from __future__ import annotations

import logging
import math
from typing import Final

from faststream.redis.prometheus import RedisPrometheusMiddleware
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

log = logging.getLogger("memoria.metrics")

# -- names -------------------------------------------------------------------------------------

LLM_TOKENS_TOTAL: Final = "memoria_llm_tokens_total"
LLM_COST_USD_TOTAL: Final = "memoria_llm_cost_usd_total"
CYCLES_TOTAL: Final = "memoria_cycles_total"
CYCLE_DURATION_SECONDS: Final = "memoria_cycle_duration_seconds"
BUS_METRICS_PREFIX: Final = "faststream"  # FastStream's own names, as its dashboards expect

LABEL_MODEL: Final = "model"
LABEL_DIRECTION: Final = "direction"
LABEL_SERVICE: Final = "service"
LABEL_REASON: Final = "reason"
INPUT: Final = "input"
OUTPUT: Final = "output"

# A cycle takes from under a second (one scripted answer) to minutes (several slow steps).
CYCLE_DURATION_BUCKETS_S: Final = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, math.inf)

# -- the registry ------------------------------------------------------------------------------

# Our own registry rather than prometheus_client's global one: what a process exposes is
# exactly what is registered here, whoever else imports prometheus_client.
REGISTRY: Final = CollectorRegistry()
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

_llm_tokens = Counter(
    LLM_TOKENS_TOTAL,
    "Tokens used by LLM calls, as the provider reported them.",
    [LABEL_MODEL, LABEL_DIRECTION, LABEL_SERVICE],
    registry=REGISTRY,
)
_llm_cost = Counter(
    LLM_COST_USD_TOTAL,
    "Estimated cost of LLM calls in USD (MEMORIA_LLM_PRICES; models without a price cost 0).",
    [LABEL_MODEL, LABEL_SERVICE],
    registry=REGISTRY,
)
_cycles = Counter(CYCLES_TOTAL, "Thought cycles ended.", [LABEL_REASON], registry=REGISTRY)
_cycle_duration = Histogram(
    CYCLE_DURATION_SECONDS,
    "Time from a cycle's start to its end.",
    buckets=CYCLE_DURATION_BUCKETS_S,
    registry=REGISTRY,
)


# -- recording ---------------------------------------------------------------------------------


def count_llm_usage(
    *, service: str, model: str, input_tokens: int, output_tokens: int, cost_usd: float
) -> None:
    _llm_tokens.labels(model, INPUT, service).inc(input_tokens)
    _llm_tokens.labels(model, OUTPUT, service).inc(output_tokens)
    _llm_cost.labels(model, service).inc(cost_usd)


def count_cycle_end(reason: str, duration_s: float) -> None:
    _cycles.labels(reason).inc()
    # Start and end may be stamped by different replicas: never a negative duration.
    _cycle_duration.observe(max(0.0, duration_s))


# -- exposing ----------------------------------------------------------------------------------


def exposition() -> tuple[bytes, str]:
    """The registry in Prometheus' text format, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def bus_middleware(service: str | None) -> RedisPrometheusMiddleware:
    """FastStream's message metrics, in this registry, labelled with the service's name."""
    if service is None:
        return RedisPrometheusMiddleware(registry=REGISTRY, metrics_prefix=BUS_METRICS_PREFIX)
    return RedisPrometheusMiddleware(
        registry=REGISTRY, app_name=service, metrics_prefix=BUS_METRICS_PREFIX
    )
