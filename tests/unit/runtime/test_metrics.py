"""Metric bookkeeping (the ops port that serves them: test_ops.py)."""

from __future__ import annotations

from memoria_runtime import metrics


def test_a_negative_duration_is_observed_as_zero() -> None:
    def zero_bucket() -> float:
        labels = {"le": str(metrics.CYCLE_DURATION_BUCKETS_S[0])}
        name = f"{metrics.CYCLE_DURATION_SECONDS}_bucket"
        return metrics.REGISTRY.get_sample_value(name, labels) or 0.0

    before = zero_bucket()
    metrics.count_cycle_end("done", -3.0)  # started on a replica whose clock runs ahead
    assert zero_bucket() - before == 1
