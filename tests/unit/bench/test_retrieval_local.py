"""The retrieval bench in process: its embedding cache, its stages, and a ranking that
finds an answer the way the memory service would."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from bench.retrieval_local import EmbeddingCache, LocalStage, local_scores
from bench.retrieval_quality import Conversation, Question, Turn, binding_of
from memoria_memory.embedding import Calibration, Embedder

DIM = 16


class HashEmbedder(Embedder):
    """Bag of hashed words, L2-normalised; counts what it was asked to embed."""

    def __init__(self) -> None:
        self.embedded: list[str] = []

    @property
    def id(self) -> str:
        return "test/hash"

    @property
    def dim(self) -> int:
        return DIM

    @property
    def calibration(self) -> Calibration:
        return Calibration(floor=0.0, cutoff=0.5)

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * DIM
        for word in text.lower().replace("?", "").split():
            vector[hashlib.sha256(word.encode()).digest()[0] % DIM] += 1.0
        norm = sum(v * v for v in vector) ** 0.5 or 1.0
        return [v / norm for v in vector]

    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        return [self._vector(text) for text in texts]

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        return [self._vector(text) for text in texts]


async def test_the_cache_embeds_a_text_once_across_runs(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    first = await EmbeddingCache(embedder, tmp_path).vectors(["a b", "c"], kind="query")
    again = EmbeddingCache(embedder, tmp_path)  # a later run: reads the file
    second = await again.vectors(["c", "a b", "d"], kind="query")
    assert embedder.embedded == ["a b", "c", "d"]
    assert second[1].tolist() == first[0].tolist()
    assert second.shape == (3, DIM)


def test_stages_name_a_retrieval_mode_and_optionally_a_variant() -> None:
    assert LocalStage.parse("hybrid").extra is None
    assert LocalStage.parse("hybrid+variants").queries("What food do I dislike?") == [
        "What food do I dislike?",
        "I dislike food",
        "food dislike",
    ]
    assert LocalStage.parse("dense+plain").queries("What food do I dislike?") == [
        "What food do I dislike?"
    ]
    for wrong in ("hybrid+rerank", "semantic"):
        with pytest.raises(ValueError, match="unknown in-process stage"):
            LocalStage.parse(wrong)


async def test_every_stage_ranks_the_answering_turn_first(tmp_path: Path) -> None:
    turns = [
        Turn("D1:1", "Ana", "I really dislike mushrooms", "2024-01-01T00:00:00Z"),
        Turn("D1:2", "Ana", "The weather is nice today", "2024-01-01T00:01:00Z"),
        Turn("D1:3", "Bo", "My cat is called Biscuit", "2024-01-01T00:02:00Z"),
    ]
    conversation = Conversation(
        "c1", turns, [Question("What food does Ana dislike? mushrooms", frozenset({"D1:1"}), 1)]
    )
    stages = ["dense", "lexical", "hybrid", "hybrid+plain", "hybrid+variants"]
    scores = await local_scores(
        [conversation],
        stages,
        HashEmbedder(),
        0.6,
        top_k=10,
        binding_of=binding_of,
        cache_dir=tmp_path,
    )
    assert [s.stage for s in scores] == stages
    for stage in scores:
        assert stage.reciprocal_ranks == [1.0], stage.stage
