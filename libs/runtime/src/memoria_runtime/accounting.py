"""What a cycle's LLM calls used and cost, added up across the services that make them.

Decision asks the model for each step and action workers run the steps, in other processes,
so each adds the tokens of its calls to one Redis hash per cycle (``keys.cycle_usage``:
``<model>:in`` / ``<model>:out``, HINCRBY) and decision reads it when the cycle ends. The
same calls feed the process's Prometheus counters (:mod:`memoria_runtime.metrics`).

Costs are estimates: ``MEMORIA_LLM_PRICES`` (USD per million tokens, input and output) per
model, and 0 for a model it does not list (a local model, the scripted one).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final

from redis.exceptions import RedisError

from memoria_contracts import usage
from memoria_contracts.events import CycleUsage, ModelUsage
from memoria_contracts.usage import Usage
from memoria_runtime import keys, metrics
from memoria_runtime.partitions import Partition

log = logging.getLogger("memoria.accounting")

Prices = Mapping[str, tuple[float, float]]
"""Model → (USD per million input tokens, USD per million output tokens)."""

TOKENS_PER_PRICE_UNIT: Final = 1_000_000
INPUT_FIELD: Final = "in"
OUTPUT_FIELD: Final = "out"
_FIELD_SEPARATOR: Final = ":"  # model names may hold one too (``llama3.1:8b``): split last


def cost_usd(model: str, input_tokens: int, output_tokens: int, prices: Prices) -> float:
    """The estimated cost of these tokens of ``model``; 0 when it has no price."""
    price_in, price_out = prices.get(model, (0.0, 0.0))
    return (input_tokens * price_in + output_tokens * price_out) / TOKENS_PER_PRICE_UNIT


def by_model(used: Iterable[Usage]) -> dict[str, tuple[int, int]]:
    """Model → (input tokens, output tokens), summed."""
    totals: dict[str, tuple[int, int]] = {}
    for item in used:
        input_tokens, output_tokens = totals.get(item.model, (0, 0))
        totals[item.model] = (input_tokens + item.input_tokens, output_tokens + item.output_tokens)
    return totals


def priced(used: Iterable[Usage], prices: Prices) -> CycleUsage:
    """Totals and per-model shares of ``used``, with their estimated costs."""
    shares = {
        model: ModelUsage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd(model, input_tokens, output_tokens, prices),
        )
        for model, (input_tokens, output_tokens) in sorted(by_model(used).items())
    }
    return CycleUsage(
        input_tokens=sum(share.input_tokens for share in shares.values()),
        output_tokens=sum(share.output_tokens for share in shares.values()),
        cost_usd=sum(share.cost_usd for share in shares.values()),
        by_model=shares,
    )


def _field(model: str, direction: str) -> str:
    return f"{model}{_FIELD_SEPARATOR}{direction}"


def count_usage(
    used: Iterable[Usage], *, service: str, prices: Prices
) -> dict[str, tuple[int, int]]:
    """Count ``used`` in the process's metrics; returns it summed by model (what
    :func:`queue_add` adds to the cycle)."""
    totals = by_model(used)
    for model, (input_tokens, output_tokens) in totals.items():
        metrics.count_llm_usage(
            service=service,
            model=model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd(model, input_tokens, output_tokens, prices),
        )
    return totals


def queue_add(
    pipe: Any, part: Partition, cycle_id: str, totals: Mapping[str, tuple[int, int]]
) -> None:
    """Queue on ``pipe`` the commands that add ``totals`` to the cycle's hash, so a caller
    can send them with its own writes in one round trip. No transaction is needed: the
    increments are independent, and a lost one is only a missing estimate."""
    if not totals:
        return
    key = keys.cycle_usage(part, cycle_id)
    for model, (input_tokens, output_tokens) in totals.items():
        pipe.hincrby(key, _field(model, INPUT_FIELD), input_tokens)
        pipe.hincrby(key, _field(model, OUTPUT_FIELD), output_tokens)
    pipe.expire(key, keys.CYCLE_TTL_S)  # lives as long as the cycle's state


async def add_to_cycle(
    redis: Any,
    part: Partition,
    cycle_id: str,
    used: Iterable[Usage],
    *,
    service: str,
    prices: Prices,
) -> None:
    """Count ``used`` in the process's metrics and add it to the cycle's hash.

    A step that runs again after a crash adds its tokens again: they were really spent
    twice, so that is the right count, not a duplicate to remove.

    Never raises for Redis: usage is an estimate, and losing one count is better than
    failing the step (which would run again and spend the tokens again)."""
    totals = count_usage(used, service=service, prices=prices)
    if not totals:
        return
    try:
        async with redis.pipeline(transaction=False) as pipe:
            queue_add(pipe, part, cycle_id, totals)
            await pipe.execute()
    except RedisError as exc:
        log.warning("cycle %s: token usage not recorded: %r", cycle_id, exc)


async def read_cycle(redis: Any, part: Partition, cycle_id: str) -> list[Usage]:
    """What the cycle's calls used so far, one entry per model (empty when nothing was
    recorded, or when Redis cannot say: the cycle ends without its usage rather than not
    at all)."""
    try:
        raw: dict[bytes, bytes] = await redis.hgetall(keys.cycle_usage(part, cycle_id))
    except RedisError as exc:
        log.warning("cycle %s: token usage unreadable: %r", cycle_id, exc)
        return []
    return parse_cycle(raw)


def parse_cycle(raw: Mapping[bytes, bytes]) -> list[Usage]:
    """The usage in the cycle's hash as read (HGETALL), one entry per model."""
    counts: dict[str, dict[str, int]] = {}
    for name, value in raw.items():
        model, _, direction = name.decode().rpartition(_FIELD_SEPARATOR)
        if model and direction in (INPUT_FIELD, OUTPUT_FIELD):
            counts.setdefault(model, {})[direction] = int(value)
    return [
        Usage(model, count.get(INPUT_FIELD, 0), count.get(OUTPUT_FIELD, 0))
        for model, count in sorted(counts.items())
    ]


@asynccontextmanager
async def charged_on_failure(
    redis: Any, part: Partition, cycle_id: str, *, service: str, prices: Prices
) -> AsyncIterator[list[Usage]]:
    """Collect the usage of the LLM calls made in the block (and in tasks it starts). When the
    block fails, add it to the cycle at once: a failed call's tokens were spent as well. When
    it succeeds, the caller adds it with the write it makes next anyway (``count_usage`` +
    ``queue_add`` in that write's pipeline), which saves a round trip per step."""
    with usage.collecting() as used:
        try:
            yield used
        except BaseException:  # cancelled (a shutdown) too: what was spent counts
            await add_to_cycle(redis, part, cycle_id, used, service=service, prices=prices)
            raise
