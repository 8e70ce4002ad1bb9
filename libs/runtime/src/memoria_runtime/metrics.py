"""Prometheus metrics: the one registry a Memoria process exposes, and every metric's name.

Each process keeps its own counters; Prometheus adds them up across processes and replicas.
Every name is a constant here, so dashboards and alerts have one place to look:

* ``memoria_llm_tokens_total{model, direction, service}``: tokens the LLM calls of a service
  used (``direction``: ``input`` or ``output``);
* ``memoria_llm_cost_usd_total{model, service}``: their estimated cost (``MEMORIA_LLM_PRICES``);
* ``memoria_cycles_total{reason}`` and ``memoria_cycle_duration_seconds``: ended cycles
  (decision);
* ``memoria_bus_entries_total{service, stream, group, outcome}`` and
  ``memoria_bus_handling_seconds{service, stream, group}``: stream entries the group consumers
  (bus/consumer.py) took, by outcome (``handled``, ``failed``: left pending for a retry,
  ``dead_lettered``), and how long their handlers ran; the gateway's chat.out fan-out counts
  as group ``fan-out`` (``dead_lettered``: a dropped forgery);
* ``memoria_bus_handlers_running{service, stream, group}`` and
  ``memoria_bus_handler_slots{service, stream, group}``: handlers a group consumer runs now,
  and how many it may run at once (``MEMORIA_CONSUMER_CONCURRENCY``); running at the slots
  for long = the service is saturated, add replicas;
* ``memoria_bus_published_total{service, stream}``: entries a service appended to a stream;
* ``memoria_vector_searches_total{source}``: the memory service's vector searches, answered
  from a user's vectors held in process (``held``) or by Milvus (``milvus``: a miss, holding
  off, or the broker unreachable); ``memoria_vectors_held_bytes``: what the held vectors take
  (``MEMORIA_VECTOR_CACHE_MB`` bounds it; ADR 14);
* ``memoria_history_reads_behind_total``: history reads the memory service answered before
  its history group had stored every message posted before them (it waits up to a second);
* ``process_*``, ``python_*``: the process itself.

The gateway serves them at ``/metrics`` on its own port; the other services on their ops
port, ``MEMORIA_METRICS_PORT``, when it is set (:mod:`memoria_runtime.ops`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Final

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
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
BUS_ENTRIES_TOTAL: Final = "memoria_bus_entries_total"
BUS_HANDLING_SECONDS: Final = "memoria_bus_handling_seconds"
BUS_PUBLISHED_TOTAL: Final = "memoria_bus_published_total"
BUS_HANDLERS_RUNNING: Final = "memoria_bus_handlers_running"
BUS_HANDLER_SLOTS: Final = "memoria_bus_handler_slots"
VECTOR_SEARCHES_TOTAL: Final = "memoria_vector_searches_total"
VECTORS_HELD_BYTES: Final = "memoria_vectors_held_bytes"
HISTORY_READS_BEHIND_TOTAL: Final = "memoria_history_reads_behind_total"

LABEL_MODEL: Final = "model"
LABEL_DIRECTION: Final = "direction"
LABEL_SERVICE: Final = "service"
LABEL_REASON: Final = "reason"
LABEL_STREAM: Final = "stream"
LABEL_GROUP: Final = "group"
LABEL_OUTCOME: Final = "outcome"
LABEL_SOURCE: Final = "source"
HELD: Final = "held"
MILVUS: Final = "milvus"
HANDLED: Final = "handled"
FAILED: Final = "failed"
DEAD_LETTERED: Final = "dead_lettered"
INPUT: Final = "input"
OUTPUT: Final = "output"

# A cycle takes from under a second (one scripted answer) to minutes (several slow steps).
CYCLE_DURATION_BUCKETS_S: Final = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, math.inf)
# A handler takes from a millisecond (a history row) to a minute (an LLM step).
HANDLING_BUCKETS_S: Final = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, math.inf)

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

_bus_entries = Counter(
    BUS_ENTRIES_TOTAL,
    "Stream entries taken by a consumer group, by outcome.",
    [LABEL_SERVICE, LABEL_STREAM, LABEL_GROUP, LABEL_OUTCOME],
    registry=REGISTRY,
)
_bus_handling = Histogram(
    BUS_HANDLING_SECONDS,
    "Time a consumer group's handler ran on one entry.",
    [LABEL_SERVICE, LABEL_STREAM, LABEL_GROUP],
    buckets=HANDLING_BUCKETS_S,
    registry=REGISTRY,
)

_bus_running = Gauge(
    BUS_HANDLERS_RUNNING,
    "Handlers a consumer group runs now.",
    [LABEL_SERVICE, LABEL_STREAM, LABEL_GROUP],
    registry=REGISTRY,
)
_bus_slots = Gauge(
    BUS_HANDLER_SLOTS,
    "Handlers a consumer group may run at once.",
    [LABEL_SERVICE, LABEL_STREAM, LABEL_GROUP],
    registry=REGISTRY,
)

_bus_published = Counter(
    BUS_PUBLISHED_TOTAL,
    "Entries appended to a stream.",
    [LABEL_SERVICE, LABEL_STREAM],
    registry=REGISTRY,
)

_vector_searches = Counter(
    VECTOR_SEARCHES_TOTAL,
    "Vector searches of the memory service, by what answered them.",
    [LABEL_SOURCE],
    registry=REGISTRY,
)
_vectors_held = Gauge(
    VECTORS_HELD_BYTES, "Bytes of users' vectors held in process.", registry=REGISTRY
)
_history_reads_behind = Counter(
    HISTORY_READS_BEHIND_TOTAL,
    "History reads answered before every message posted before them was stored.",
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


@dataclass(frozen=True, slots=True)
class GroupConsumerMetrics:
    """The series of one (service, stream, group), bound once: a label lookup per entry
    would cost more than the increment."""

    handled: Counter
    failed: Counter
    dead_lettered: Counter
    handling_seconds: Histogram
    running: Gauge
    slots: Gauge


def group_consumer_metrics(service: str, stream: str, group: str) -> GroupConsumerMetrics:
    return GroupConsumerMetrics(
        handled=_bus_entries.labels(service, stream, group, HANDLED),
        failed=_bus_entries.labels(service, stream, group, FAILED),
        dead_lettered=_bus_entries.labels(service, stream, group, DEAD_LETTERED),
        handling_seconds=_bus_handling.labels(service, stream, group),
        running=_bus_running.labels(service, stream, group),
        slots=_bus_slots.labels(service, stream, group),
    )


def published_counter(service: str, stream: str) -> Counter:
    return _bus_published.labels(service, stream)


@dataclass(frozen=True, slots=True)
class VectorCacheMetrics:
    held: Counter
    milvus: Counter
    held_bytes: Gauge


def vector_cache_metrics() -> VectorCacheMetrics:
    return VectorCacheMetrics(
        held=_vector_searches.labels(HELD),
        milvus=_vector_searches.labels(MILVUS),
        held_bytes=_vectors_held,
    )


def history_reads_behind_counter() -> Counter:
    return _history_reads_behind


# -- exposing ----------------------------------------------------------------------------------


def exposition() -> tuple[bytes, str]:
    """The registry in Prometheus' text format, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
