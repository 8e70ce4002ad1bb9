"""How dense and lexical evidence make one relevance (memories/fusion.py)."""

from __future__ import annotations

import itertools

import pytest

from memoria_memory.memories.fusion import LEXICAL_HALF_SCORE, Fusion

DENSE = [None, 0.0, 0.2, 0.59, 0.6, 0.9, 1.0]
BM25 = [None, 0.0, 0.5, 3.0, 6.0, 40.0, 1e9]


def test_hybrid_relevance_stays_within_0_and_1_and_never_falls_below_dense() -> None:
    fusion = Fusion("hybrid")
    for dense, bm25 in itertools.product(DENSE, BM25):
        relevance = fusion.relevance(dense, bm25)
        assert 0.0 <= relevance <= 1.0
        assert relevance >= (dense or 0.0)


def test_without_lexical_evidence_hybrid_is_the_dense_relevance() -> None:
    for dense in DENSE:
        assert Fusion("hybrid").relevance(dense, None) == (dense or 0.0)


def test_more_lexical_evidence_never_lowers_relevance() -> None:
    fusion = Fusion("hybrid")
    for dense in DENSE:
        scores = [fusion.relevance(dense, bm25) for bm25 in BM25]
        assert scores == sorted(scores)


def test_a_lexical_only_hit_needs_strong_evidence_to_pass_the_default_cut_off() -> None:
    fusion = Fusion("hybrid")
    assert fusion.relevance(None, 1.0) < 0.6  # one common word
    assert fusion.relevance(None, 6.0) >= 0.6  # a rare term, or several words
    assert fusion.relevance(0.4, 4.5) > 0.6  # lifts a memory just under the cut-off


def test_the_single_stages_use_their_own_evidence_only() -> None:
    assert Fusion("dense").relevance(0.7, 100.0) == 0.7
    assert Fusion("lexical").relevance(0.7, LEXICAL_HALF_SCORE) == pytest.approx(0.5)
    assert Fusion("lexical").relevance(0.7, None) == 0.0


@pytest.mark.parametrize(("weight", "half"), [(-0.1, 3.0), (1.1, 3.0), (0.5, 0.0)])
def test_out_of_range_parameters_are_refused(weight: float, half: float) -> None:
    with pytest.raises(ValueError, match="lexical_"):
        Fusion("hybrid", weight, half)
