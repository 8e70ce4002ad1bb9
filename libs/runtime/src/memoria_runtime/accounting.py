"""What a cycle's LLM calls used and cost, added up across the services that make them.

Decision asks the model for each step and action workers run the steps, in other processes.
The tokens travel with the cycle's own events, not in a store of their own: a worker's step
reports its tokens in its ``action.completed`` (``ActionCompleted.tokens``), decision adds them
and its own to the cycle's state, and prices the sum when the cycle ends. The same calls feed
the process's Prometheus counters (:mod:`memoria_runtime.metrics`) as they end.

Costs are estimates: ``MEMORIA_LLM_PRICES`` (USD per million tokens, input and output) per
model, and 0 for a model it does not list (a local model, the scripted one).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Final

from memoria_contracts import usage
from memoria_contracts.events import CycleUsage, ModelUsage
from memoria_contracts.usage import Usage
from memoria_runtime import metrics

Prices = Mapping[str, tuple[float, float]]
"""Model → (USD per million input tokens, USD per million output tokens)."""

Tokens = dict[str, tuple[int, int]]
"""Model → (input tokens, output tokens)."""

TOKENS_PER_PRICE_UNIT: Final = 1_000_000


def cost_usd(model: str, input_tokens: int, output_tokens: int, prices: Prices) -> float:
    """The estimated cost of these tokens of ``model``; 0 when it has no price."""
    price_in, price_out = prices.get(model, (0.0, 0.0))
    return (input_tokens * price_in + output_tokens * price_out) / TOKENS_PER_PRICE_UNIT


def by_model(used: Iterable[Usage]) -> Tokens:
    """``used`` summed by model."""
    totals: Tokens = {}
    for item in used:
        input_tokens, output_tokens = totals.get(item.model, (0, 0))
        totals[item.model] = (input_tokens + item.input_tokens, output_tokens + item.output_tokens)
    return totals


def priced(tokens: Mapping[str, tuple[int, int]], prices: Prices) -> CycleUsage:
    """Totals and per-model shares of ``tokens`` (by model), with their estimated costs."""
    shares = {
        model: ModelUsage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd(model, input_tokens, output_tokens, prices),
        )
        for model, (input_tokens, output_tokens) in sorted(tokens.items())
    }
    return CycleUsage(
        input_tokens=sum(share.input_tokens for share in shares.values()),
        output_tokens=sum(share.output_tokens for share in shares.values()),
        cost_usd=sum(share.cost_usd for share in shares.values()),
        by_model=shares,
    )


def count_usage(used: Iterable[Usage], *, service: str, prices: Prices) -> Tokens:
    """Count ``used`` in the process's metrics; returns it summed by model."""
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


@contextmanager
def spent(*, service: str, prices: Prices) -> Iterator[Tokens]:
    """The tokens of the LLM calls made in the block (and in tasks it starts), by model,
    filled in as the block ends, and counted in the metrics then. A block that fails counts
    too: a failed call's tokens were spent as well."""
    totals: Tokens = {}
    with usage.collecting() as used:
        try:
            yield totals
        finally:
            totals.update(count_usage(used, service=service, prices=prices))
