"""The LLM provider's ``embedding`` mode as an :class:`Embedder` (Gemini in production).

The provider already maps ``passage``/``query`` onto its own task types (Gemini:
RETRIEVAL_DOCUMENT / RETRIEVAL_QUERY) and retries transient failures; this adapter adds what
the memory service relies on whatever the provider: a fixed dimension, unit-length vectors,
bounded request sizes and one error type.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from memoria_llm.port import EmbedPurpose, LanguageModel, LLMError
from memoria_memory.embedding.port import Calibration, Embedder, EmbeddingError

log = logging.getLogger(__name__)

# Texts per provider call: Gemini's batchEmbedContents takes at most 100 texts per request,
# and a bounded batch keeps one failed request from costing a whole bulk save.
LLM_EMBED_BATCH = 100
# Vectors further than this from unit length are normalised here (Gemini normalises only
# full-size 3072-dim output); a zero or non-finite vector is an error.
NORM_TOLERANCE = 1e-3

# NOT MEASURED HERE: this machine cannot reach Google, so gemini-embedding-001 was never run
# through bench/calibrate_relevance.py. What is public: Google's Gemini API embeddings guide
# (ai.google.dev/gemini-api/docs/embeddings) shows gemini-embedding-001 scoring a paraphrase
# pair 0.948 and two unrelated questions 0.747 and 0.737 (SEMANTIC_SIMILARITY task type,
# full 3072 dimensions) - compressed like e5, so a raw 0.6 would let everything through. We
# embed with RETRIEVAL_DOCUMENT/RETRIEVAL_QUERY at 768 dimensions, which can shift those
# numbers. The cut-off is deliberately set just above the documented unrelated scores: too
# low costs some irrelevant memories in a prompt (bounded by memory_limit), too high hides
# memories the user saved, which is the worse failure. Replace with a measurement:
#   MEMORIA_GEMINI_API_KEY=... .venv/bin/python bench/calibrate_relevance.py --embedder llm
GEMINI_EMBEDDING_001 = Calibration(floor=0.70, cutoff=0.76)
KNOWN_CALIBRATIONS: dict[str, Calibration] = {
    "gemini/gemini-embedding-001": GEMINI_EMBEDDING_001,
}
# For an embedding model nobody calibrated: the same unmeasured guess, with a warning.
UNCALIBRATED = GEMINI_EMBEDDING_001


class LanguageModelEmbedder(Embedder):
    """Embeds through ``llm.embedding``. ``model`` names the provider's embedding model (the
    id is ``{llm.name}/{model}``); ``dim`` is the dimension the provider was asked for."""

    def __init__(
        self,
        llm: LanguageModel,
        *,
        model: str,
        dim: int,
        calibration: Calibration | None = None,
        batch_size: int = LLM_EMBED_BATCH,
        owns_llm: bool = False,
    ) -> None:
        """``owns_llm``: :meth:`aclose` closes ``llm`` too (the factory made it for us)."""
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._llm = llm
        self._id = f"{llm.name}/{model}"
        self._dim = dim
        self._batch_size = batch_size
        self._owns_llm = owns_llm
        if calibration is None:
            calibration = KNOWN_CALIBRATIONS.get(self._id)
            if calibration is None:
                log.warning(
                    "no relevance calibration for %s; using an unmeasured default %s - run "
                    "bench/calibrate_relevance.py to measure one",
                    self._id,
                    UNCALIBRATED,
                )
                calibration = UNCALIBRATED
        self._calibration = calibration

    @property
    def id(self) -> str:
        return self._id

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def calibration(self) -> Calibration:
        return self._calibration

    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(texts, "passage")

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(texts, "query")

    async def aclose(self) -> None:
        if self._owns_llm:
            await self._llm.aclose()

    async def _embed(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        items = list(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(items), self._batch_size):
            chunk = items[start : start + self._batch_size]
            try:
                answer = await self._llm.embedding(chunk, purpose)
            except LLMError as exc:
                raise EmbeddingError(
                    f"{self._id} could not embed {len(chunk)} texts: {exc}"
                ) from exc
            if len(answer) != len(chunk):
                raise EmbeddingError(
                    f"{self._id} returned {len(answer)} vectors for {len(chunk)} texts"
                )
            vectors.extend(self._unit(vector) for vector in answer)
        return vectors

    def _unit(self, vector: Sequence[float]) -> list[float]:
        if len(vector) != self._dim:
            raise EmbeddingError(
                f"{self._id} returned a vector of {len(vector)} dimensions, not {self._dim}"
            )
        norm = math.sqrt(math.fsum(value * value for value in vector))
        if norm == 0.0 or not math.isfinite(norm):
            raise EmbeddingError(f"{self._id} returned a vector that cannot be normalised")
        if abs(norm - 1.0) <= NORM_TOLERANCE:
            return list(vector)
        return [value / norm for value in vector]
