"""The pure parts of the relevance fit (bench/relevance_fit.py, bench/relevance_signals.py):
the logistic regression, the signals a search has per memory, and the default cut-off rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.relevance_fit import (
    LabelledSet,
    card_stats,
    default_cutoff,
    fit_logistic,
    fit_map,
    ranked_by_question,
)
from bench.relevance_signals import Candidate, Corpus, candidates
from bench.retrieval_local import EmbeddingCache
from memoria_memory.embedding.port import Calibration, Embedder
from memoria_memory.memories.fusion import Fusion


def test_the_fit_recovers_a_known_logistic_relation() -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=20_000)
    labels = (rng.random(x.size) < 1 / (1 + np.exp(-(-1.5 + 2.0 * x)))).astype(np.float64)

    intercept, slope = fit_logistic(x, labels, np.ones_like(x))

    assert intercept == pytest.approx(-1.5, abs=0.1)
    assert slope == pytest.approx(2.0, abs=0.1)


def candidate(question: str, cosine: float | None, bm25: float | None, relevant: bool) -> Candidate:
    return Candidate(question, cosine, bm25, relevant, wanted=1)


def test_a_fitted_map_rises_with_the_evidence() -> None:
    calibration = Calibration(floor=0.5, cutoff=0.8)
    found = [
        candidate(f"q{i}", cosine, bm25, relevant)
        for i in range(40)
        for cosine, bm25, relevant in [(0.9, 8.0, True), (0.7, None, False), (0.6, 1.0, False)]
    ]
    fitted = fit_map("hybrid", calibration, [LabelledSet("toy", found, 1.0)])
    fusion = Fusion("hybrid")
    low = fusion.evidence(calibration.relevance(0.6), 1.0)
    high = fusion.evidence(calibration.relevance(0.9), 8.0)
    assert fitted.slope > 0
    assert fitted(high) > 0.9 > 0.1 > fitted(low)


def test_cards_count_only_the_top_results_at_or_above_the_cut_off() -> None:
    found = [candidate("q", None, 9.0, True), candidate("q", None, 1.0, False)]
    ranked = ranked_by_question(found, lambda c: (c.bm25 or 0.0) / 10)

    stats = card_stats(ranked, 0.5)

    assert (stats.cards_per_question, stats.precision, stats.recall) == (1.0, 1.0, 1.0)


def test_the_default_cut_off_is_the_most_precise_one_that_still_answers_the_facts() -> None:
    # Facts: one question whose answer scores 0.3. Chats: an unrelated memory at 0.2 and
    # one relevant at 0.6. Cut-offs above 0.3 would hide the fact; 0.21-0.3 drop the noise.
    facts = ranked_by_question([candidate("f", 0.0, None, True)], lambda _: 0.3)
    chats = ranked_by_question(
        [candidate("c", 0.0, None, False), candidate("c", 1.0, None, True)],
        lambda c: 0.6 if c.relevant else 0.2,
    )
    assert default_cutoff(facts, chats) == pytest.approx(0.21)


class Toy(Embedder):
    """Two-dimensional vectors: a text about food points one way, anything else the other.
    Keeps the texts it embedded as queries."""

    def __init__(self) -> None:
        self.queried: list[str] = []

    @property
    def id(self) -> str:
        return "toy/food"

    @property
    def dim(self) -> int:
        return 2

    @property
    def calibration(self) -> Calibration:
        return Calibration(floor=0.1, cutoff=0.5)

    async def passages(self, texts: list[str]) -> list[list[float]]:  # type: ignore[override]
        return [[1.0, 0.0] if "food" in t or "mushroom" in t else [0.0, 1.0] for t in texts]

    async def queries(self, texts: list[str]) -> list[list[float]]:  # type: ignore[override]
        self.queried.extend(texts)
        return await self.passages(texts)


async def test_signals_are_what_the_service_sees(tmp_path: Path) -> None:
    corpus = Corpus(
        name="toy",
        memories=["I dislike mushrooms as food", "My sister is called Ana"],
        questions=[("which food do I dislike?", frozenset({0}))],
    )
    embedder = Toy()

    found = await candidates(corpus, EmbeddingCache(embedder, tmp_path))

    by_label = {c.relevant: c for c in found}
    assert by_label[True].cosine == pytest.approx(1.0)
    assert (by_label[True].bm25 or 0.0) > 0
    assert by_label[False].bm25 is None  # shares no word with the question
    # The question is searched as the service rewrites it: its statement form is embedded
    # beside it, and the search reuses the cached vectors of a first run.
    assert "I dislike food" in embedder.queried
    again = Toy()
    assert await candidates(corpus, EmbeddingCache(again, tmp_path)) == found
    assert again.queried == []


def test_each_set_weighs_its_share_whatever_its_number_of_questions() -> None:
    calibration = Calibration(floor=0.5, cutoff=0.8)
    # At the same evidence the answer of a chat question is rarely right and a fact's
    # always; each question also finds an unrelated memory with little evidence.
    chats = [
        found
        for i in range(300)
        for found in (
            candidate(f"c{i}", 0.7, None, i % 10 == 0),
            candidate(f"c{i}", 0.55, None, False),
        )
    ]
    facts = [
        found
        for i in range(30)
        for found in (candidate(f"f{i}", 0.7, None, True), candidate(f"f{i}", 0.55, None, False))
    ]
    evidence = Fusion("hybrid").evidence(calibration.relevance(0.7), None)

    def fitted(chats_share: float, facts_share: float) -> float:
        sets = [LabelledSet("chats", chats, chats_share), LabelledSet("facts", facts, facts_share)]
        return fit_map("hybrid", calibration, sets)(evidence)

    # Every question alike: the chats' 300 decide (the rate over all 330 questions).
    assert fitted(300, 30) == pytest.approx((30 + 30) / 330, abs=0.02)
    # Halves: the mean of the two sets' rates, 0.1 and 1.
    assert fitted(0.5, 0.5) == pytest.approx(0.55, abs=0.02)
