"""The fault proxy's settings, without a socket (its behaviour on real connections:
tests/component/support/test_fault_proxy.py)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "support"))

from fault_proxy import Faults


def test_no_faults_hold_nothing() -> None:
    assert Faults().hold_s(random.Random(1)) == 0.0


def test_a_hold_stays_within_latency_plus_or_minus_jitter_and_never_below_zero() -> None:
    rng = random.Random(7)
    holds = [Faults(latency_s=0.1, jitter_s=0.05).hold_s(rng) for _ in range(2000)]
    assert min(holds) >= 0.05
    assert max(holds) <= 0.15
    assert min(holds) < 0.06 and max(holds) > 0.14  # the jitter spreads it
    wide = [Faults(latency_s=0.01, jitter_s=0.05).hold_s(rng) for _ in range(500)]
    assert min(wide) == 0.0


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("latency_s", -0.1, "negative"),
        ("jitter_s", -1.0, "negative"),
        ("reset_mean_s", 0.0, "positive"),
        ("bandwidth_bps", 0.0, "positive"),
    ],
)
def test_impossible_faults_are_refused(field: str, value: float, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Faults(**{field: value})  # type: ignore[arg-type]
