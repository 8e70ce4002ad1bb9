"""One relevance in [0, 1] from the dense and the lexical evidence of a memory.

Dense evidence is the embedder's calibrated relevance of the memory's best row
(``Calibration.relevance``: 0.6 at the cut-off that keeps 90% of related pairs). Lexical
evidence is the BM25 score of its best row, squashed to [0, 1) by ``s / (s + half)``: a
score of ``half`` is 0.5, whatever the number of memories (a rank-based fusion such as RRF
would give the best of a poor lot the same score as the best of a good one, so
``min_relevance`` would stop meaning anything).

Hybrid combines them as independent signals, ``1 - (1 - dense) * (1 - weight * lexical)``:
lexical evidence only ever raises a memory's relevance, a memory without any keeps its dense
relevance (so ``min_relevance`` keeps its calibrated meaning), and an exact rare word can
lift a memory the embedder ranked low. See docs/relevance.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from memoria_runtime.settings import MemoryRetrieval

# Chosen on the labelled pairs of bench/data/relevance_pairs.jsonl and a keyword set (the
# ADR on hybrid retrieval has the numbers): a BM25 score of one fairly rare matching term
# (idf ~3, one occurrence) is 0.5, and lexical evidence alone tops out at 0.9.
LEXICAL_HALF_SCORE: Final = 3.0
LEXICAL_WEIGHT: Final = 0.9


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

    def lexical_relevance(self, bm25: float) -> float:
        score = max(bm25, 0.0)
        return score / (score + self.lexical_half_score)

    def relevance(self, dense: float | None, bm25: float | None) -> float:
        """``dense``: calibrated relevance of the best row (None: not a dense hit);
        ``bm25``: BM25 score of the best row (None: not a lexical hit)."""
        lexical = 0.0 if bm25 is None else self.lexical_relevance(bm25)
        if self.retrieval == "lexical":
            return lexical
        semantic = 0.0 if dense is None else min(max(dense, 0.0), 1.0)
        if self.retrieval == "dense" or lexical == 0.0:
            return semantic
        # max(): rounding must never put a memory below its dense relevance.
        return max(semantic, 1.0 - (1.0 - semantic) * (1.0 - self.lexical_weight * lexical))
