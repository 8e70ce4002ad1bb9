"""A cycle's token usage: priced per model, collected from a block's calls (and the tasks it
starts), counted in the process's metrics; no process, no Redis."""

from __future__ import annotations

import asyncio

import pytest

from memoria_contracts import usage
from memoria_contracts.usage import Usage
from memoria_runtime import accounting, metrics

PRICES = {"big-model": (2.0, 10.0), "small-model": (0.5, 1.0)}
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
    priced = accounting.priced({"local-llama": (10, 5)}, PRICES)
    assert (priced.input_tokens, priced.output_tokens, priced.cost_usd) == (10, 5, 0.0)


def test_usage_is_summed_by_model_and_priced_with_each_models_prices() -> None:
    used = [
        Usage("big-model", 1000, 100),
        Usage("small-model", 4000, 2000),
        Usage("big-model", 500, 50),
        Usage("local-llama", 70, 30),
    ]
    priced = accounting.priced(accounting.by_model(used), PRICES)

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
    priced = accounting.priced({}, PRICES)
    assert (priced.input_tokens, priced.output_tokens, priced.cost_usd) == (0, 0, 0.0)
    assert priced.by_model == {}


# -- a block's calls ---------------------------------------------------------------------------


async def test_a_block_and_the_tasks_it_starts_are_collected_and_counted() -> None:
    async def call(model: str) -> None:
        await asyncio.sleep(0)
        usage.report(Usage(model, 10, 1))

    before = tokens_counted("small-model", metrics.INPUT)
    with accounting.spent(service=SERVICE, prices=PRICES) as tokens:
        usage.report(Usage("big-model", 5, 5))
        await asyncio.ensure_future(call("small-model"))  # like a worker running its action
        usage.report(Usage("big-model", 1, 0))
        assert tokens == {}  # filled in as the block ends
    assert tokens == {"big-model": (6, 5), "small-model": (10, 1)}
    assert tokens_counted("small-model", metrics.INPUT) - before == 10


def test_a_failing_block_still_says_and_counts_what_it_spent() -> None:
    before = (tokens_counted("big-model", metrics.INPUT), cost_counted("big-model"))

    def failing_step(tokens: list[accounting.Tokens]) -> None:
        with accounting.spent(service=SERVICE, prices=PRICES) as spent:
            tokens.append(spent)
            usage.report(Usage("big-model", 1000, 100))
            raise RuntimeError("the step failed after calling the model")

    said: list[accounting.Tokens] = []
    with pytest.raises(RuntimeError):
        failing_step(said)
    (tokens,) = said
    assert tokens == {"big-model": (1000, 100)}
    assert tokens_counted("big-model", metrics.INPUT) - before[0] == 1000
    assert cost_counted("big-model") - before[1] == pytest.approx(0.003)


def test_calls_outside_a_block_are_not_collected() -> None:
    usage.report(Usage("big-model", 1, 1))  # nobody collecting: dropped, not an error
    with accounting.spent(service=SERVICE, prices=PRICES) as tokens:
        usage.report(Usage("small-model", 2, 2))
    usage.report(Usage("big-model", 3, 3))  # after the block: not its call
    assert tokens == {"small-model": (2, 2)}


def test_model_names_with_colons_are_kept_whole() -> None:
    with accounting.spent(service=SERVICE, prices=PRICES) as tokens:
        usage.report(Usage("llama3.1:8b", 12, 3))
    assert tokens == {"llama3.1:8b": (12, 3)}
