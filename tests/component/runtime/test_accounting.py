"""A cycle's token usage: priced per model, added up in Redis across services, counted in the
process's metrics."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from memoria_contracts import usage
from memoria_contracts.usage import Usage
from memoria_runtime import accounting, keys, metrics
from memoria_runtime.partitions import Partitions

PARTITIONS = Partitions()
ONE = PARTITIONS.all[0]  # the embedded default: one partition, keys untagged

PRICES = {"big-model": (2.0, 10.0), "small-model": (0.5, 1.0)}
CYCLE = "cyc_usage1"
SERVICE = "test-service"


def tokens_counted(model: str, direction: str, service: str = SERVICE) -> float:
    value = metrics.REGISTRY.get_sample_value(
        metrics.LLM_TOKENS_TOTAL,
        {
            metrics.LABEL_MODEL: model,
            metrics.LABEL_DIRECTION: direction,
            metrics.LABEL_SERVICE: service,
        },
    )
    return value or 0.0


def cost_counted(model: str, service: str = SERVICE) -> float:
    value = metrics.REGISTRY.get_sample_value(
        metrics.LLM_COST_USD_TOTAL, {metrics.LABEL_MODEL: model, metrics.LABEL_SERVICE: service}
    )
    return value or 0.0


# -- pricing -----------------------------------------------------------------------------------


def test_prices_are_per_million_tokens_input_and_output() -> None:
    assert accounting.cost_usd("big-model", 1_000_000, 0, PRICES) == pytest.approx(2.0)
    assert accounting.cost_usd("big-model", 0, 1_000_000, PRICES) == pytest.approx(10.0)
    assert accounting.cost_usd("big-model", 3000, 500, PRICES) == pytest.approx(0.011)


def test_a_model_without_a_price_costs_nothing() -> None:
    assert accounting.cost_usd("local-llama", 10_000, 10_000, PRICES) == 0.0
    priced = accounting.priced([Usage("local-llama", 10, 5)], PRICES)
    assert (priced.input_tokens, priced.output_tokens, priced.cost_usd) == (10, 5, 0.0)


def test_usage_is_summed_by_model_and_priced_with_each_models_prices() -> None:
    used = [
        Usage("big-model", 1000, 100),
        Usage("small-model", 4000, 2000),
        Usage("big-model", 500, 50),
        Usage("local-llama", 70, 30),
    ]
    priced = accounting.priced(used, PRICES)

    big, small, local = (priced.by_model[m] for m in ("big-model", "small-model", "local-llama"))
    assert (big.input_tokens, big.output_tokens) == (1500, 150)
    assert big.cost_usd == pytest.approx((1500 * 2.0 + 150 * 10.0) / 1e6)
    assert (small.input_tokens, small.output_tokens) == (4000, 2000)
    assert small.cost_usd == pytest.approx((4000 * 0.5 + 2000 * 1.0) / 1e6)
    assert local.cost_usd == 0.0
    assert priced.input_tokens == 1500 + 4000 + 70
    assert priced.output_tokens == 150 + 2000 + 30
    assert priced.cost_usd == pytest.approx(big.cost_usd + small.cost_usd)


def test_nothing_used_is_priced_as_zero() -> None:
    priced = accounting.priced([], PRICES)
    assert (priced.input_tokens, priced.output_tokens, priced.cost_usd) == (0, 0, 0.0)
    assert priced.by_model == {}


# -- accumulation in Redis ---------------------------------------------------------------------


async def test_services_add_up_in_the_cycles_hash(redis: Redis) -> None:
    # Decision's calls, then a worker's, as the two services would record them.
    await accounting.add_to_cycle(
        redis, ONE, CYCLE, [Usage("big-model", 100, 2)], service="decision", prices=PRICES
    )
    await accounting.add_to_cycle(
        redis,
        ONE,
        CYCLE,
        [Usage("small-model", 300, 40), Usage("big-model", 10, 1), Usage("small-model", 5, 5)],
        service="action-worker",
        prices=PRICES,
    )

    assert await redis.hgetall(keys.cycle_usage(ONE, CYCLE)) == {
        b"big-model:in": b"110",
        b"big-model:out": b"3",
        b"small-model:in": b"305",
        b"small-model:out": b"45",
    }
    assert await accounting.read_cycle(redis, ONE, CYCLE) == [
        Usage("big-model", 110, 3),
        Usage("small-model", 305, 45),
    ]


async def test_the_hash_lives_as_long_as_the_cycle_state(redis: Redis) -> None:
    await accounting.add_to_cycle(
        redis, ONE, CYCLE, [Usage("big-model", 1, 1)], service=SERVICE, prices=PRICES
    )
    ttl = await redis.ttl(keys.cycle_usage(ONE, CYCLE))
    assert keys.CYCLE_TTL_S - 5 <= ttl <= keys.CYCLE_TTL_S


async def test_model_names_with_colons_survive_the_round_trip(redis: Redis) -> None:
    await accounting.add_to_cycle(
        redis, ONE, CYCLE, [Usage("llama3.1:8b", 12, 3)], service=SERVICE, prices=PRICES
    )
    assert await accounting.read_cycle(redis, ONE, CYCLE) == [Usage("llama3.1:8b", 12, 3)]


async def test_no_usage_writes_nothing(redis: Redis) -> None:
    await accounting.add_to_cycle(redis, ONE, CYCLE, [], service=SERVICE, prices=PRICES)
    assert not await redis.exists(keys.cycle_usage(ONE, CYCLE))
    assert await accounting.read_cycle(redis, ONE, CYCLE) == []


async def test_unknown_fields_are_ignored(redis: Redis) -> None:
    await redis.hset(
        keys.cycle_usage(ONE, CYCLE), mapping={"big-model:in": 4, "big-model:cached": 9}
    )
    assert await accounting.read_cycle(redis, ONE, CYCLE) == [Usage("big-model", 4, 0)]


async def test_redis_failures_lose_the_count_not_the_step() -> None:
    unreachable = Redis(
        host="127.0.0.1", port=1, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
    )
    try:
        await accounting.add_to_cycle(
            unreachable, ONE, CYCLE, [Usage("big-model", 1, 1)], service=SERVICE, prices=PRICES
        )
        assert await accounting.read_cycle(unreachable, ONE, CYCLE) == []
    finally:
        await unreachable.aclose()


# -- metrics -----------------------------------------------------------------------------------


async def test_recorded_usage_is_counted_in_the_metrics(redis: Redis) -> None:
    before = (
        tokens_counted("big-model", metrics.INPUT),
        tokens_counted("big-model", metrics.OUTPUT),
        cost_counted("big-model"),
    )
    await accounting.add_to_cycle(
        redis, ONE, CYCLE, [Usage("big-model", 1000, 100)], service=SERVICE, prices=PRICES
    )
    assert tokens_counted("big-model", metrics.INPUT) - before[0] == 1000
    assert tokens_counted("big-model", metrics.OUTPUT) - before[1] == 100
    assert cost_counted("big-model") - before[2] == pytest.approx(0.003)


# -- collecting a block's calls ----------------------------------------------------------------


async def test_a_block_and_the_tasks_it_starts_are_collected(redis: Redis) -> None:
    async def call(model: str) -> None:
        await asyncio.sleep(0)
        usage.report(Usage(model, 10, 1))

    async with accounting.charged_on_failure(
        redis, ONE, CYCLE, service=SERVICE, prices=PRICES
    ) as used:
        usage.report(Usage("big-model", 5, 5))
        await asyncio.ensure_future(call("small-model"))  # like a worker running its action
    assert len(used) == 2
    assert accounting.by_model(used) == {"big-model": (5, 5), "small-model": (10, 1)}
    assert await accounting.read_cycle(redis, ONE, CYCLE) == []  # the caller writes a success


async def test_a_failing_block_is_added_to_the_cycle_at_once(redis: Redis) -> None:
    async def failing_step() -> None:
        async with accounting.charged_on_failure(redis, ONE, CYCLE, service=SERVICE, prices=PRICES):
            usage.report(Usage("big-model", 7, 0))
            raise RuntimeError("the step failed after calling the model")

    with pytest.raises(RuntimeError):
        await failing_step()
    assert await accounting.read_cycle(redis, ONE, CYCLE) == [Usage("big-model", 7, 0)]
